//go:build noazure

package storeurl

import (
	"context"
	"fmt"
)

// openAzure refuses: this build leaves the Azure backend out (tag noazure).
func openAzure(context.Context, string, string, string) (*Lockfile, error) {
	return nil, fmt.Errorf("%w: this build leaves Azure Blob Storage out (built with -tags noazure); build without that tag for azblob:// URLs", ErrBadURL)
}
