package storeurl

import (
	"context"
	"errors"
)

func openAzure(ctx context.Context, container, key, where string) (*Lockfile, error) {
	return nil, errors.New("azblob: not yet")
}
