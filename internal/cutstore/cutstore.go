// Package cutstore is the cut of the public store/faultstore under its old
// import path, for the code that still uses it.
//
// Deprecated: import github.com/s3lect/s3lect/store/faultstore.
package cutstore

import (
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/faultstore"
)

// ErrCut is faultstore.ErrCut.
var ErrCut = faultstore.ErrCut

// Store is faultstore.Store.
type Store = faultstore.Store

// New is faultstore.New.
func New(s store.Store) *Store { return faultstore.New(s) }
