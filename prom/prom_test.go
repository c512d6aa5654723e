package prom

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/faultstore"
	"github.com/s3lect/s3lect/store/memstore"
)

// listen opens a loopback listener on a free port of the test's range.
func listen(t *testing.T) net.Listener {
	t.Helper()
	for port := 19540; port < 19560; port++ {
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return ln
		}
	}
	t.Fatal("no free port in 127.0.0.1:19540-19559")
	return nil
}

// sample finds the value of the series name{labels...} in a text scrape.
func sample(body, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		sel, val, _ := strings.Cut(line, " ")
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(sel, l)
		}
		if ok {
			v, err := strconv.ParseFloat(val, 64)
			return v, err == nil
		}
	}
	return 0, false
}

func TestScrapeFollowsFailover(t *testing.T) {
	mem := memstore.New()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ids := []string{"a", "b", "c"}
	conns := map[string]*faultstore.Store{}
	var electors []*s3lect.Elector
	for _, id := range ids {
		conns[id] = faultstore.New(mem)
		e, err := s3lect.New(s3lect.ElectorConfig{Store: conns[id], LockfilePath: "prom/test.json", ServerID: id, Logger: quiet,
			FrequentInterval: 50 * time.Millisecond, InfrequentInterval: 200 * time.Millisecond, LeaderTimeout: 150 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		electors = append(electors, e)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(electors...))
	ln := listen(t)
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/metrics"
	client := &http.Client{}
	defer client.CloseIdleConnections()

	scrape := func() string {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %s\n%s", resp.Status, b)
		}
		return string(b)
	}
	// await scrapes until cond holds. The bound is generous (hundreds of
	// LeaderTimeouts): it only turns a hang into a failure that says what
	// was missing.
	await := func(what string, cond func(body string) bool) string {
		t.Helper()
		give := time.Now().Add(30 * time.Second)
		for {
			body := scrape()
			if cond(body) {
				return body
			}
			if time.Now().After(give) {
				t.Fatalf("never saw %s; last scrape:\n%s", what, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	leaderOf := func(body string) (string, int) {
		who, n := "", 0
		for _, id := range ids {
			if v, _ := sample(body, "s3lect_leader", `server="`+id+`"`); v == 1 {
				who, n = id, n+1
			}
		}
		return who, n
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, e := range electors {
		go func() {
			for ctx.Err() == nil {
				if l, err := e.Campaign(ctx); err == nil {
					<-l.Context().Done()
				}
			}
		}()
	}
	body := await("one leader", func(b string) bool { _, n := leaderOf(b); return n == 1 })
	first, _ := leaderOf(body)
	term, _ := sample(body, "s3lect_term", `server="`+first+`"`)
	if v, _ := sample(body, "s3lect_leaderships_won_total", `server="`+first+`"`); v != 1 {
		t.Errorf("leader %s: s3lect_leaderships_won_total = %v; want 1", first, v)
	}
	if v, _ := sample(body, "s3lect_mode", `server="`+first+`"`, `mode="leader"`); v != 1 {
		t.Errorf("leader %s: s3lect_mode{mode=leader} = %v; want 1", first, v)
	}
	if _, ok := sample(body, "s3lect_renewal_age_seconds", `server="`+first+`"`); !ok {
		t.Errorf("leader %s has no s3lect_renewal_age_seconds:\n%s", first, body)
	}
	if v, _ := sample(body, "s3lect_store_requests_total", `server="`+first+`"`, `op="put"`, `result="ok"`); v < 1 {
		t.Errorf("leader %s: put/ok requests = %v; want at least its takeover", first, v)
	}

	conns[first].Cut() // the leader crashes
	body = await("a new leader", func(b string) bool { who, n := leaderOf(b); return n == 1 && who != first })
	second, _ := leaderOf(body)
	if v, _ := sample(body, "s3lect_term", `server="`+second+`"`); v <= term {
		t.Errorf("new leader %s: s3lect_term = %v; want above %v", second, v, term)
	}
	body = await("the old leader's lease counted as expired", func(b string) bool {
		v, _ := sample(b, "s3lect_leadership_ends_total", `server="`+first+`"`, `cause="expired"`)
		return v == 1
	})
	if v, _ := sample(body, "s3lect_store_requests_total", `server="`+first+`"`, `result="error"`); v < 1 {
		t.Errorf("crashed %s: failed store requests = %v; want its failed renewals counted", first, v)
	}
	if _, ok := sample(body, "s3lect_renewal_age_seconds", `server="`+first+`"`); ok {
		t.Errorf("crashed %s still reports a renewal age after its leadership ended", first)
	}
	if v, _ := sample(body, "s3lect_leader", `server="`+first+`"`); v != 0 {
		t.Errorf("crashed %s: s3lect_leader = %v; want 0", first, v)
	}
	cancel()
}
