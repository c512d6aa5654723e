package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store/memstore"
	_ "github.com/s3lect/s3lect/store/s3store" // lets Bucket build the S3 store
)

// A leader's checkpoint, written through the fence: the writer of a lower
// term (a leader paused past its lease, resumed) is refused.
func Example() {
	ctx := context.Background()
	st := memstore.New() // the store.Store you elect on
	term := uint64(7)    // lead.Term(), a pool shard's Term() or S3LECT_TERM

	w, err := fence.New(st, term)
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Seal(ctx, "jobs/a/checkpoint"); err != nil { // first: no older leader can write it now
		log.Fatal(err) // errors.Is(err, fence.ErrFenced): a newer leader owns it; stop
	}
	if err := w.Put(ctx, "jobs/a/checkpoint", []byte("offset 42")); err != nil {
		log.Fatal(err)
	}
	data, written, err := w.Get(ctx, "jobs/a/checkpoint")
	fmt.Printf("%s (term %d) %v\n", data, written, err)

	stale, _ := fence.New(st, 6)
	err = stale.Put(ctx, "jobs/a/checkpoint", []byte("offset 40"))
	fmt.Println(errors.Is(err, fence.ErrFenced))
	fmt.Println(err)
	// Output:
	// offset 42 (term 7) <nil>
	// true
	// fence: put "jobs/a/checkpoint": fenced: the key holds term 7, higher than this writer's term 6 (a newer leader wrote or sealed it; stop writing)
}

// A leader that elects with Bucket fences its objects on the store the
// election runs on: Elector.Store gives it, built once from the same
// configuration.
func ExampleNew_elector() {
	ctx := context.Background()
	e, err := s3lect.New(s3lect.ElectorConfig{
		Bucket:       os.Getenv("BUCKET"), // credentials, region, endpoint: the AWS environment
		LockfilePath: "leader/jobs.json",
		ServerID:     os.Getenv("POD_NAME"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	lead, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	w, err := fence.New(e.Store(), lead.Term()) // the same bucket and client
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Seal(lead.Context(), "jobs/a/checkpoint"); err != nil {
		log.Fatal(err)
	}
}
