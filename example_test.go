package s3lect_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

func Example() {
	ctx := context.Background()
	e, err := s3lect.New(s3lect.ElectorConfig{
		Store:        memstore.New(), // in production: s3store, or leave nil and set Bucket
		LockfilePath: "leader/scheduler.json",
		ServerID:     "scheduler-1",
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	lead, err := e.Campaign(ctx) // blocks until this instance leads
	if err != nil {
		panic(err)
	}
	fmt.Println("leading, term", lead.Term())

	// Do the leader's work under lead.Context(): it is cancelled the
	// moment this instance may no longer be sure it leads.
	work := func(ctx context.Context) { /* ... */ }
	work(lead.Context())

	if err := lead.Resign(ctx); err != nil {
		panic(err)
	}
	fmt.Println(context.Cause(lead.Context()))
	// Output:
	// leading, term 1
	// s3lect: leadership resigned
}

func ExampleElector_Changes() {
	mem := memstore.New()
	newElector := func(id string) *s3lect.Elector {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: "leader/group.json", ServerID: id, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			panic(err)
		}
		return e
	}
	candidate, watcher := newElector("worker-7"), newElector("dashboard")
	defer watcher.Close()
	lead, err := candidate.Campaign(context.Background())
	if err != nil {
		panic(err)
	}

	changes := watcher.Changes() // a pure observer: it never campaigns
	c := <-changes
	fmt.Printf("leader %s, term %d, me: %v\n", c.Leader.LeaderID, c.Leader.Term, c.IsLeader)

	lead.Resign(context.Background())
	candidate.Close()
	// Output:
	// leader worker-7, term 1, me: false
}

// Drain, then release: when the leader's work must be finished before any
// other instance starts it, stop the work and wait for it before resigning.
func ExampleLeadership_Resign() {
	mem := memstore.New()
	e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: "leader/job.json", ServerID: "a", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	lead, err := e.Campaign(context.Background())
	if err != nil {
		panic(err)
	}

	workCtx, stopWork := context.WithCancel(lead.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-workCtx.Done() // the work: runs until told to stop
	}()

	stopWork()                              // 1. stop the work
	wg.Wait()                               // 2. wait until it has really stopped
	err = lead.Resign(context.Background()) // 3. only now let another instance lead
	fmt.Println(err, errors.Is(context.Cause(lead.Context()), s3lect.ErrResigned))
	// Output:
	// <nil> true
}
