package memstore_test

import (
	"testing"

	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/memstore"
	"github.com/s3lect/s3lect/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memstore.New() })
}
