package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

// TestDuplicateIDIsReported: two processes given one worker ID overwrite
// each other's session. One of them finds out, and its Run returns an
// error matching ErrDuplicateID that names the ID and the fix; the other
// goes on and leads every shard. Before, both went on for ever, each
// losing its session to the other, and shards stayed unled with only
// "session lost" warnings (mutation noduplicatecheck).
func TestDuplicateIDIsReported(t *testing.T) {
	defer setMutation(t)()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		shards := []string{"a", "b", "c", "d"}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type twin struct {
			p    *Pool
			done chan error
		}
		var twins []*twin
		for range 2 {
			p, err := New(Config{Store: mem, Prefix: "p/", ID: "w1", Shards: shards, Logger: quiet,
				Work: func(ctx context.Context, _ string, _ *s3lect.Leadership) { <-ctx.Done() }})
			if err != nil {
				t.Fatal(err)
			}
			tw := &twin{p: p, done: make(chan error, 1)}
			go func() { tw.done <- p.Run(ctx) }()
			twins = append(twins, tw)
			time.Sleep(testFI / 3)
		}
		var stopped, other *twin
		select {
		case err := <-twins[0].done:
			stopped, other = twins[0], twins[1]
			checkDuplicateErr(t, err)
		case err := <-twins[1].done:
			stopped, other = twins[1], twins[0]
			checkDuplicateErr(t, err)
		case <-time.After(10 * testLT):
			cancel()
			for _, tw := range twins {
				<-tw.done
			}
			t.Fatalf("two processes ran as w1 for 10 × LeaderTimeout and neither Run returned")
		}
		if got := stopped.p.Leading(); len(got) != 0 {
			t.Errorf("the stopped process leads %v", got)
		}
		time.Sleep(3 * testLT)
		if got := other.p.Leading(); len(got) != len(shards) {
			t.Errorf("3 × LeaderTimeout after its twin stopped, the other process leads %v; want all %d shards", got, len(shards))
		}
		cancel()
		if err := <-other.done; err != nil {
			t.Errorf("the remaining process's Run() = %v; want nil", err)
		}
	})
}

func checkDuplicateErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrDuplicateID) || !strings.Contains(err.Error(), `"w1"`) || !strings.Contains(err.Error(), "unique ID") {
		t.Errorf("Run() = %v; want an error matching ErrDuplicateID that names %q and asks for unique IDs", err, "w1")
	}
}
