package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/memstore"
)

func TestMetricsFlagServesStatsAndHealth(t *testing.T) {
	mem := memstore.New()
	var electors []*s3lect.Elector
	for _, id := range []string{"a", "b"} {
		e, err := s3lect.New(s3lect.ElectorConfig{Store: mem, LockfilePath: "demo/metrics.json", ServerID: id,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		electors = append(electors, e)
	}
	lead, err := electors[0].Campaign(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	changes := electors[1].Changes()
	for c := range changes { // wait until b has read the lockfile
		if c.Leader.LeaderID == "a" {
			break
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port nothing uses, for serveMetrics
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop, err := serveMetrics(addr, io.Discard, electors)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path string) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second}
		defer c.CloseIdleConnections()
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`s3lect_leader{lockfile="demo/metrics.json",server="a"} 1`,
		`s3lect_leader{lockfile="demo/metrics.json",server="b"} 0`,
		`s3lect_term{lockfile="demo/metrics.json",server="b"} ` + itoa(lead.Term()),
		`s3lect_mode{lockfile="demo/metrics.json",server="a",mode="leader"} 1`,
		`s3lect_leaderships_won_total{lockfile="demo/metrics.json",server="a"} 1`,
		// The win: the term's claim, the term object's raise, then the
		// lockfile's create (docs/protocol.md, 1.1).
		`s3lect_store_requests_total{lockfile="demo/metrics.json",server="a",op="put",result="ok"} 3`,
		`s3lect_renewal_age_seconds{lockfile="demo/metrics.json",server="a"} `,
		"# TYPE s3lect_store_requests_total counter",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `s3lect_renewal_age_seconds{lockfile="demo/metrics.json",server="b"}`) {
		t.Errorf("follower b reports a renewal age:\n%s", body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q; want 200 ok", code, body)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
