// Package devtls is the public package github.com/s3lect/s3lect/devtls
// under its old import path, for the tests that still use it.
//
// Deprecated: import github.com/s3lect/s3lect/devtls.
package devtls

import "github.com/s3lect/s3lect/devtls"

// PKI is devtls.PKI.
type PKI = devtls.PKI

// New is devtls.New.
func New() (*PKI, error) { return devtls.New() }
