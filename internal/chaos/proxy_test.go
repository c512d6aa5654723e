package chaos

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/s3store"
)

var (
	chaosDuration = flag.Duration("chaos.duration", 60*time.Second, "how long TestRandomFaults injects faults (a soak: 10m)")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestRandomFaults' schedule seed (0: a new one, printed)")
)

// proxied is an elector in this process whose every S3 request goes
// through a toxiproxy of its own.
type proxied struct {
	id    string
	proxy *toxiproxy.Proxy
	e     *s3lect.Elector
}

// group starts n electors, each behind its own proxy to m, campaigning in
// a loop and reporting to led. It stops them when the test ends.
func group(t *testing.T, m *minio, n int, key string, led *ledger) []*proxied {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var nodes []*proxied
	for i := range n {
		p := &proxied{id: fmt.Sprint("n", i)}
		p.proxy = toxiproxy.NewProxy(srv, p.id, "127.0.0.1:0", m.addr)
		if err := p.proxy.Start(); err != nil {
			t.Fatal(err)
		}
		e, err := s3lect.New(s3lect.ElectorConfig{
			Store: s3store.New(m.client(t, p.proxy.Listen), bucket), LockfilePath: key, ServerID: p.id,
			FrequentInterval: chaosFI, InfrequentInterval: chaosII, LeaderTimeout: chaosLT,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		p.e = e
		nodes = append(nodes, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lead, err := e.Campaign(ctx)
				if err != nil {
					return
				}
				led.start(p.id, lead.Term(), mono())
				for {
					at := mono() // read the time first: a pause after it cannot stretch the interval
					if lead.Context().Err() != nil {
						break
					}
					led.work(p.id, at)
					time.Sleep(10 * time.Millisecond)
				}
				led.end(p.id, fmt.Sprint(context.Cause(lead.Context())))
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for _, p := range nodes {
			p.e.Close()
		}
		wg.Wait()
		for _, p := range nodes {
			p.proxy.Stop()
		}
	})
	return nodes
}

// fault is one kind of trouble a proxy can cause, and how to undo it.
type fault struct {
	kind  string
	apply func(p *toxiproxy.Proxy) error
	heal  func(p *toxiproxy.Proxy)
}

func toxic(name, stream, typ string, attrs string) fault {
	return fault{
		kind: name,
		apply: func(p *toxiproxy.Proxy) error {
			_, err := p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
				`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)))
			return err
		},
		heal: func(p *toxiproxy.Proxy) { p.Toxics.RemoveToxic(context.Background(), name) },
	}
}

var faults = []fault{
	toxic("latency spike past the lease", "downstream", "latency", fmt.Sprintf(`{"latency":%d}`, (2*chaosLT).Milliseconds())),
	toxic("bandwidth limit", "downstream", "bandwidth", `{"rate":1}`),
	toxic("connection cut mid-reply", "downstream", "limit_data", `{"bytes":60}`),
	toxic("connection reset mid-request", "upstream", "reset_peer", `{"timeout":0}`),
	toxic("reply dropped after the write landed", "downstream", "timeout", `{"timeout":0}`),
	{
		kind:  "leader partitioned",
		apply: func(p *toxiproxy.Proxy) error { p.Stop(); return nil },
		heal:  func(p *toxiproxy.Proxy) { p.Start() },
	},
}

// TestEachFaultOnTheLeader hits the leader with each fault in turn, long
// enough to cost it the lease, and checks the group through each.
func TestEachFaultOnTheLeader(t *testing.T) {
	t.Parallel() // each has its own MinIO, lockfile and ledger (see doc.go)
	m := startMinIO(t)
	led := newLedger()
	nodes := group(t, m, 3, "chaos/each.json", led)
	byID := map[string]*proxied{}
	for _, p := range nodes {
		byID[p.id] = p
	}
	var survived tally
	_, term := led.waitLeader(t, 0)
	for _, f := range faults {
		time.Sleep(2 * chaosLT) // settle
		leader, _, ok := led.leader()
		if !ok {
			leader, term = led.waitLeader(t, term)
		}
		p := byID[leader]
		if err := f.apply(p.proxy); err != nil {
			t.Fatalf("%s: %v", f.kind, err)
		}
		time.Sleep(3 * chaosLT)
		f.heal(p.proxy)
		survived.add(f.kind)
		_, term = led.waitLeader(t, 0)
	}
	time.Sleep(bound)
	led.check(t, mono()-bound)
	survived.report(t, "each fault on the leader")
}

// TestRandomFaults injects random faults into random members, mostly the
// leader, for -chaos.duration, then heals everything and checks safety
// and liveness.
func TestRandomFaults(t *testing.T) {
	t.Parallel() // each has its own MinIO, lockfile and ledger (see doc.go)
	m := startMinIO(t)
	led := newLedger()
	nodes := group(t, m, 3, "chaos/random.json", led)
	led.waitLeader(t, 0)
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := rand.New(rand.NewPCG(seed, 2))
	t.Logf("schedule seed %d (replay the schedule with -chaos.seed=%d)", seed, seed)
	var survived tally
	end := time.Now().Add(*chaosDuration)
	for time.Now().Before(end) {
		f := faults[r.IntN(len(faults))]
		target := nodes[r.IntN(len(nodes))]
		if leader, _, ok := led.leader(); ok && r.IntN(10) < 7 {
			for _, p := range nodes {
				if p.id == leader {
					target = p
				}
			}
		}
		if err := f.apply(target.proxy); err != nil {
			t.Fatalf("%s on %s: %v", f.kind, target.id, err)
		}
		time.Sleep(time.Duration(r.Int64N(int64(3 * chaosLT))))
		f.heal(target.proxy)
		survived.add(f.kind)
		time.Sleep(time.Duration(r.Int64N(int64(chaosLT))))
	}
	healed := mono()
	time.Sleep(bound + chaosLT)
	led.check(t, healed)
	survived.report(t, fmt.Sprintf("random faults for %v (seed %d)", *chaosDuration, seed))
}
