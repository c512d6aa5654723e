package main

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store/memstore"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestResumesAndFencesTheOldLeader: the leader of term 1 counts; the
// leader of term 2 takes over while term 1 still runs (paused past its
// lease): it resumes from term 1's checkpoint, and term 1's next write is
// fenced, so the counter never goes back.
func TestResumesAndFencesTheOldLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		quiet := func(string, ...any) {}
		ctx1, cancel1 := context.WithCancel(t.Context())
		defer cancel1()
		done1 := make(chan error, 1)
		go func() { done1 <- job(ctx1, st, 1, time.Second, quiet) }()
		time.Sleep(5500 * time.Millisecond) // term 1 counts to 5

		ctx2, cancel2 := context.WithCancel(t.Context())
		done2 := make(chan error, 1)
		go func() { done2 <- job(ctx2, st, 2, time.Second, quiet) }()
		if err := <-done1; !errors.Is(err, fence.ErrFenced) {
			t.Fatalf("term 1's job after term 2 took over: %v; want ErrFenced", err)
		}
		time.Sleep(3 * time.Second)
		cancel2()
		if err := <-done2; err != nil {
			t.Fatalf("term 2's job: %v", err)
		}
		data, term, err := fence.Read(t.Context(), st, checkpoint)
		n, _ := strconv.Atoi(string(data))
		if err != nil || term != 2 || n != 8 {
			t.Fatalf("checkpoint = %q, term %d, %v; want 8 (5 by term 1, then 3 by term 2), term 2", data, term, err)
		}
	})
}
