package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/s3lect/s3lect/store"
)

// TestScheduleIsFixed: docs/protocol.md, 6: an attempt, a retry 100 ms
// after the first failure, another 1 s after the second, then the caller
// decides; and the same again after a Reset, as every call starts.
func TestScheduleIsFixed(t *testing.T) {
	b := Schedule()
	want := []time.Duration{100 * time.Millisecond, time.Second, backoff.Stop}
	for round := range 2 {
		for i, w := range want {
			if got := b.NextBackOff(); got != w {
				t.Fatalf("round %d: NextBackOff() #%d = %v; want %v", round, i+1, got, w)
			}
		}
		b.Reset()
	}
	if sum := want[0] + want[1]; Waits != sum {
		t.Errorf("Waits = %v; want %v", Waits, sum)
	}
}

func TestDo(t *testing.T) {
	errFail := errors.New("connection reset (injected)")
	errRefused := errors.New("refused (injected)")
	for _, tc := range []struct {
		name    string
		errs    []error // each attempt's answer; past the end: success
		cancel  bool    // ctx ends during the first wait
		want    error
		wantAt  []time.Duration // when each attempt started
		wantErr []error         // every error the result must match
	}{
		{name: "success at once", want: nil, wantAt: []time.Duration{0}},
		{name: "failures are retried on the schedule", errs: []error{errFail, errFail},
			wantAt: []time.Duration{0, 100 * time.Millisecond, 1100 * time.Millisecond}},
		{name: "three failures: the last one", errs: []error{errFail, errFail, errFail},
			wantAt: []time.Duration{0, 100 * time.Millisecond, 1100 * time.Millisecond}, wantErr: []error{errFail}},
		{name: "precondition failed is an answer", errs: []error{store.ErrPreconditionFailed},
			wantAt: []time.Duration{0}, wantErr: []error{store.ErrPreconditionFailed}},
		{name: "not found is an answer", errs: []error{store.ErrNotFound},
			wantAt: []time.Duration{0}, wantErr: []error{store.ErrNotFound}},
		{name: "a permanent store error is an answer", errs: []error{store.Permanent(errRefused)},
			wantAt: []time.Duration{0}, wantErr: []error{errRefused}},
		{name: "Final is an answer", errs: []error{Final(errRefused)},
			wantAt: []time.Duration{0}, wantErr: []error{errRefused}},
		{name: "ctx ending: both its error and the last attempt's", errs: []error{errFail}, cancel: true,
			wantAt: []time.Duration{0}, wantErr: []error{context.Canceled, errFail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				start := time.Now()
				var at []time.Duration
				got, err := Do(ctx, time.Second, func(actx context.Context, n int) (int, error) {
					if n != len(at) {
						t.Errorf("attempt %d numbered %d", len(at), n)
					}
					if d, ok := actx.Deadline(); !ok || d.Sub(time.Now()) != time.Second {
						t.Errorf("attempt %d: deadline %v, %v; want 1s from now", n, d, ok)
					}
					at = append(at, time.Since(start))
					if tc.cancel {
						time.AfterFunc(50*time.Millisecond, cancel)
					}
					if n < len(tc.errs) {
						return 0, tc.errs[n]
					}
					return 7, nil
				})
				if fmt.Sprint(at) != fmt.Sprint(tc.wantAt) {
					t.Errorf("attempts at %v; want %v", at, tc.wantAt)
				}
				if len(tc.wantErr) == 0 && (err != nil || got != 7) {
					t.Errorf("Do() = %d, %v; want 7, nil", got, err)
				}
				for _, w := range tc.wantErr {
					if !errors.Is(err, w) {
						t.Errorf("Do() error = %v; want one matching %v", err, w)
					}
				}
			})
		})
	}
}
