package main

import (
	"bytes"
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example runs in real time; the pool's timing is tested exactly in
// package pool. This checks the example does what it prints.
func TestShardsSpreadAndMoveToSurvivors(t *testing.T) {
	var out bytes.Buffer
	res, err := run(context.Background(), 3, 12, 20, &out)
	if err != nil {
		t.Fatalf("run() = %v", err)
	}
	if res.spread == 0 {
		t.Errorf("the shards never spread at 4 ± 2 per worker:\n%s", out.String())
	}
	total := 0
	for id, n := range res.survivors {
		if id != res.dead {
			total += n
		}
	}
	if res.survivors[res.dead] != 0 || total != 12 {
		t.Errorf("at the end %v; want all 12 shards on the survivors, none on the killed %s:\n%s", res.survivors, res.dead, out.String())
	}
	if res.double != 0 {
		t.Errorf("%d shards ran on two workers at once; want none", res.double)
	}
	if res.steadyCalls.Puts == 0 {
		t.Errorf("no store writes counted while steady: %+v", res.steadyCalls)
	}
}

func TestBadArguments(t *testing.T) {
	if _, err := run(context.Background(), 1, 6, 10, &bytes.Buffer{}); err == nil {
		t.Error("run with one worker = nil; want an error")
	}
}
