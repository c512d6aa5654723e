//go:build !noazure

package storeurl

import (
	"context"

	"github.com/s3lect/s3lect/store/azblobstore"
)

// openAzure builds an Azure Blob store on container from the environment
// (AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with
// DefaultAzureCredential).
func openAzure(ctx context.Context, container, key, where string) (*Lockfile, error) {
	st, err := azblobstore.FromEnvironment(ctx, container)
	if err != nil {
		return nil, err
	}
	return &Lockfile{Store: st, Key: key, URL: where, Close: st.CloseIdleConnections}, nil
}
