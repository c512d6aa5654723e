package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/s3lect/s3lect/internal/s3test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quick is a small report: it checks the plumbing, not the figures.
func quick() options {
	return options{scale: 50, trials: 3, window: 2 * time.Second, groups: []int{3}, electors: 100}
}

func checkReport(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"# s3lect benchmark report", "- machine:", "- intervals: the defaults divided by 50",
		"How a crash is modelled: A crash is a killed process",
		"| memstore | storage | crash failover |",
		"| memstore | storage, InfrequentInterval = FrequentInterval | graceful handover |",
		"| memstore | peer, no long-poll | graceful handover |", "| memstore | peer + long-poll | crash failover |",
		"| memstore | stale peer (peer + long-poll) | last write → takeover |",
		"| 3 | ", "## 100 electors in one process", "10 workers × 10 shards", "stacks per elector",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestReportInMemory(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), quick(), &out); err != nil {
		t.Fatal(err)
	}
	checkReport(t, out.String())
}

func TestReportOnMinIO(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_S3", s3test.Endpoint(t))
	o := quick()
	o.bucket, o.pathStyle = s3test.Bucket(t), true
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	checkReport(t, out.String())
	for _, want := range []string{"- store: S3 bucket", "| S3 | peer + long-poll | crash failover |", "| S3 | stale peer"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
