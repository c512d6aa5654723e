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
		"| storage | crash failover |", "| peer | graceful handover |", "| peer + long-poll | crash failover |",
		"| 3 | ", "## 100 electors in one process", "10 workers × 10 shards",
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
	if !strings.Contains(out.String(), "S3 bucket") {
		t.Errorf("report does not name the bucket:\n%s", out.String())
	}
}
