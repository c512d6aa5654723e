package azblobstore_test

import (
	"testing"

	"github.com/s3lect/s3lect/store/azblobstore"
)

func TestNamesInMessages(t *testing.T) {
	cases := []struct{ url, account, container string }{
		{"https://acct.blob.core.windows.net/elections", "acct", "elections"},
		{"https://acct.blob.core.windows.net/elections?sv=2024&sig=secret", "acct", "elections"},
		{"http://127.0.0.1:10000/devstoreaccount1/elections", "devstoreaccount1", "elections"},
		{"http://localhost:10000/devstoreaccount1/elections", "devstoreaccount1", "elections"},
	}
	for _, tc := range cases {
		account, container := azblobstore.Names(tc.url)
		if account != tc.account || container != tc.container {
			t.Errorf("Names(%s) = %s, %s; want %s, %s", tc.url, account, container, tc.account, tc.container)
		}
	}
}
