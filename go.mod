module github.com/s3lect/s3lect

go 1.25.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.22.0
)
