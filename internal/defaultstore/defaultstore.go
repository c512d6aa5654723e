// Package defaultstore lets s3lect.New build an S3 store when the S3
// backend is linked in, without the root package importing the AWS SDK.
// Package s3store registers itself here in its init function, the way
// database/sql drivers and gocloud.dev's URL openers do.
package defaultstore

import (
	"context"
	"sync"

	"github.com/s3lect/s3lect/store"
)

// Factory builds a store on bucket from the environment.
type Factory func(ctx context.Context, bucket string, pathStyle bool) (store.Store, error)

var (
	mu      sync.Mutex
	factory Factory
)

// Register makes f the factory. The last registration wins.
func Register(f Factory) {
	mu.Lock()
	defer mu.Unlock()
	factory = f
}

// Get returns the registered factory, or nil.
func Get() Factory {
	mu.Lock()
	defer mu.Unlock()
	return factory
}
