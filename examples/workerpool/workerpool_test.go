package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestShardsMoveToSurvivors(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), 3, 6, 50, &out); err != nil {
		t.Fatalf("run() = %v", err)
	}
	var maps []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "shard map") {
			maps = append(maps, line)
		}
	}
	if len(maps) == 0 {
		t.Fatalf("no shard map printed:\n%s", out.String())
	}
	spread := false
	for _, m := range maps {
		if strings.Contains(m, "(w1=2 w2=2 w3=2)") {
			spread = true
		}
	}
	if !spread {
		t.Errorf("shards never spread over the three workers:\n%s", out.String())
	}
	if last := maps[len(maps)-1]; !strings.Contains(last, "(w3=6)") {
		t.Errorf("final shard map %q; want every shard on w3, the only worker left\n%s", last, out.String())
	}
}

func TestBadArguments(t *testing.T) {
	if err := run(context.Background(), 1, 6, 10, &bytes.Buffer{}); err == nil {
		t.Error("run with one worker = nil; want an error")
	}
}
