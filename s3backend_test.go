package s3lect_test

// The root package's tests run with the S3 backend linked in, as a program
// that sets Bucket does (TestNewValidatesConfig's BucketWithS3Backend);
// TestBucketNeedsS3Backend checks the message when it is not.
import _ "github.com/s3lect/s3lect/store/s3store"
