package s3store_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/internal/s3test"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

// restoringFollower is a follower's store that, once armed, restores the
// lockfile right before the follower's next read to the version the
// follower read last, with versioning's CopyObject (what S3's "restore a
// previous version" does): the same bytes, so the same ETag.
type restoringFollower struct {
	*s3store.Store
	client  *s3.Client
	bucket  string
	mu      sync.Mutex
	armed   bool
	lastVer string // the version ID of the follower's last read of the lockfile
	done    int
}

func (f *restoringFollower) GetSighting(ctx context.Context, key string) ([]byte, string, string, error) {
	f.mu.Lock()
	if f.armed && f.lastVer != "" && !strings.HasSuffix(key, ".term") {
		src := f.bucket + "/" + url.PathEscape(key) + "?versionId=" + url.QueryEscape(f.lastVer)
		if _, err := f.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &f.bucket, Key: &key, CopySource: &src}); err == nil {
			f.armed = false
			f.done++
		}
	}
	f.mu.Unlock()
	data, etag, token, err := f.Store.GetSighting(ctx, key)
	if err == nil && strings.HasPrefix(token, "v:") && !strings.HasSuffix(key, ".term") {
		f.mu.Lock()
		f.lastVer = strings.TrimPrefix(token, "v:")
		f.mu.Unlock()
	}
	return data, etag, token, err
}

// TestNoTwoLeadersWhenAVersionIsRestored: issue 43 on a real server. On a
// versioned bucket, a follower's last read version is restored with
// CopyObject right before its next read, while the leader is live, five
// times over. The follower must never win while the leader's leadership
// is live (its context, which reads the leader's own clocks).
func TestNoTwoLeadersWhenAVersionIsRestored(t *testing.T) {
	client := s3test.NewClient(t, nil, "", "")
	bucket := s3test.Bucket(t) + "-versioned"
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil && !strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := client.PutBucketVersioning(t.Context(), &s3.PutBucketVersioningInput{Bucket: &bucket,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("turn versioning on: %v", err)
	}
	const key = "leader/restored.json"
	for round := range 5 {
		leaderStore := s3store.New(s3test.NewClient(t, nil, "", ""), bucket)
		fs := &restoringFollower{Store: s3store.New(s3test.NewClient(t, nil, "", ""), bucket), client: client, bucket: bucket}
		var _ store.Sighter = fs
		a, err := s3lect.New(shortConfig(leaderStore, key, "a"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := s3lect.New(shortConfig(fs, key, "b"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second) // a bound, not a speed limit
		lead, err := a.Campaign(ctx)
		if err != nil {
			t.Fatalf("round %d: Campaign() = %v", round, err)
		}
		won := make(chan *s3lect.Leadership, 1)
		overlap := make(chan bool, 1)
		go func() {
			l, err := b.Campaign(ctx)
			if err != nil {
				overlap <- false
				won <- nil
				return
			}
			overlap <- lead.Context().Err() == nil
			won <- l
		}()
		time.Sleep(3 * time.Second) // the follower is stable, reading its last version
		fs.mu.Lock()
		fs.armed = true
		fs.mu.Unlock()
		if <-overlap {
			t.Errorf("round %d: the follower won while the leader's leadership was live, after a restore of the version it last read", round)
		}
		if l := <-won; l != nil {
			l.Resign(context.Background())
		} else {
			t.Errorf("round %d: the follower never won after the leader lost the lockfile to the restore", round)
		}
		fs.mu.Lock()
		if fs.done != 1 {
			t.Errorf("round %d: %d restores; want 1", round, fs.done)
		}
		fs.mu.Unlock()
		cancel()
		a.Close()
		b.Close()
	}
}
