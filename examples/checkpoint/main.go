// Command checkpoint is a leader-only job that keeps its progress in the
// bucket, fenced: run it on several machines; one counts at a time, each
// new leader resumes from the last checkpoint, and a leader paused past
// its lease (a stopped VM, a GC pause) cannot overwrite its successor's
// checkpoint when it resumes. Environment as for examples/quickstart
// (BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
// AWS_ENDPOINT_URL_S3 and S3_PATH_STYLE=1 for MinIO).
//
// The checkpoint is a small object written through package fence; large
// state goes to keys of its own that the checkpoint names (docs/fencing.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store"
	"github.com/s3lect/s3lect/store/s3store"
)

const (
	lockfile   = "leader/checkpoint.json"
	checkpoint = "jobs/counter/checkpoint"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	st, err := s3store.FromEnvironment(ctx, os.Getenv("BUCKET"), os.Getenv("S3_PATH_STYLE") == "1")
	if err != nil {
		log.Fatal(err)
	}
	host, _ := os.Hostname()
	e, err := s3lect.New(s3lect.ElectorConfig{Store: st, LockfilePath: lockfile, ServerID: fmt.Sprintf("%s-%d", host, os.Getpid())})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	for {
		lead, err := e.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return // interrupted while waiting to lead
			}
			e.Close()
			log.Fatal(err) // a store that refused for good: the message says what to fix
		}
		err = job(lead.Context(), st, lead.Term(), time.Second, log.Printf)
		if ctx.Err() != nil {
			return // interrupted: Close, deferred, releases the lockfile
		}
		if err != nil {
			if lead.Context().Err() != nil {
				// The leadership ended under the job: say why (lease
				// expired, lost to another holder) rather than the bare
				// "context canceled" of the write it cut short.
				err = fmt.Errorf("%w (%v)", err, context.Cause(lead.Context()))
			}
			log.Printf("job: %v", err)
		}
		// The job may stop while this instance still leads (fenced, or a
		// write whose outcome is unknown): hand the leadership back, so
		// that Campaign can be called again.
		if rerr := lead.Resign(ctx); rerr != nil {
			log.Printf("resign: %v", rerr)
		}
		log.Printf("leadership ended: %v", context.Cause(lead.Context()))
		if errors.Is(err, fence.ErrFenced) {
			// A newer leader owns the checkpoint. Were this instance to
			// lead again at once, with a term still below the key's (the
			// election's objects deleted and its terms restarted), it
			// would be fenced in a loop: wait a lease first.
			select {
			case <-ctx.Done():
				return
			case <-time.After(s3lect.DefaultLeaderTimeout):
			}
		}
	}
}

// job is one leadership's work: seal the checkpoint with the term (so
// that no older leader can write it any more), resume from it, then count
// and checkpoint every interval until ctx ends or a newer leader fences
// this one.
func job(ctx context.Context, st store.Store, term uint64, every time.Duration, logf func(string, ...any)) error {
	w, err := fence.New(st, term)
	if err != nil {
		return err
	}
	if err := w.Seal(ctx, checkpoint); err != nil {
		return err // ErrFenced: a newer leader already owns it
	}
	n := uint64(0)
	data, _, err := w.Get(ctx, checkpoint) // after the seal: no older leader can change it now
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		if n, err = strconv.ParseUint(string(data), 10, 64); err != nil {
			return fmt.Errorf("checkpoint %q: %w", checkpoint, err)
		}
	}
	logf("term %d: checkpoint sealed; resuming at %d", term, n)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n++ // the work
		if err := w.Put(ctx, checkpoint, strconv.AppendUint(nil, n, 10)); err != nil {
			return err // fenced: stop at once; or the leadership ended mid-write
		}
	}
}
