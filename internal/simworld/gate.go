package simworld

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing/synctest"
	"time"
)

// Gate makes a synctest bubble's history a function of its seed. In a
// bubble, virtual time stands still while any goroutine can run, so the
// things that happen at one instant (two nodes' requests reaching the
// store, an operator's write, a partition) happen in whatever order the Go
// scheduler runs their goroutines. Through a Gate each of them waits until
// every goroutine of the bubble is blocked (synctest.Wait), and then they
// run one at a time in the order of their names and numbers, with
// another wait after each: the order is the seed's, never the
// scheduler's.
//
// One goroutine, Run's, does the waiting: only it calls synctest.Wait, so
// a simulation that uses a Gate calls Sync instead of synctest.Wait.
type Gate struct {
	mu      sync.Mutex
	pending []*gateOp
	kick    chan struct{} // capacity 1: something is pending
	seq     map[string]uint64
}

type gateOp struct {
	name string
	n    uint64
	fn   func()
	done chan struct{}
	who  string // with Debug: the calls of package s3lect that asked
}

// NewGate returns a Gate; Run must run in the bubble for Do to return.
func NewGate() *Gate {
	return &Gate{kick: make(chan struct{}, 1), seq: map[string]uint64{}}
}

// Run serves the gate until stop is closed. Start it in the bubble with go.
func (g *Gate) Run(stop <-chan struct{}) {
	for {
		select {
		case <-g.kick:
		case <-stop:
			return
		}
		for {
			synctest.Wait()
			op := g.pop()
			if op == nil {
				break
			}
			if Debug { // two runs' lines diff to the first op that differs
				fmt.Printf("gate %s %s#%d%s\n", time.Now().Format("05.000000000"), op.name, op.n, op.who)
			}
			op.fn()
			close(op.done)
		}
	}
}

// pop removes and returns the first pending op by (name, number).
func (g *Gate) pop() *gateOp {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		return nil
	}
	i := 0
	for j, op := range g.pending {
		if c := cmp.Compare(op.name, g.pending[i].name); c < 0 || c == 0 && op.n < g.pending[i].n {
			i = j
		}
	}
	op := g.pending[i]
	g.pending = slices.Delete(g.pending, i, i+1)
	return op
}

// Do runs fn once every goroutine of the bubble is blocked, after the
// ops pending then that sort before it, and returns when fn has. name
// says who asks: the ops of one name run in the order they were asked
// for. A nil Gate runs fn at once. fn must not call Do or Sync.
func (g *Gate) Do(name string, fn func()) {
	if g == nil {
		fn()
		return
	}
	g.mu.Lock()
	g.seq[name]++
	op := &gateOp{name: name, n: g.seq[name], fn: fn, done: make(chan struct{})}
	if Debug {
		op.who = askers()
	}
	g.pending = append(g.pending, op)
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	<-op.done
}

// askers names the calls of package s3lect (not simworld's) on the stack
// of Do's caller, innermost first: which of a node's goroutines asked.
func askers() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if fn := f.Function[strings.LastIndex(f.Function, "/")+1:]; strings.HasPrefix(fn, "s3lect.") {
			b.WriteString(" " + fn + ":" + strconv.Itoa(f.Line))
		}
		if !more {
			return b.String()
		}
	}
}

// Sync returns once every goroutine of the bubble but the caller's is
// blocked, as synctest.Wait does.
func (g *Gate) Sync() { g.Do("", func() {}) }

// Wrap returns fn made to run through the gate under name.
func (g *Gate) Wrap(name string, fn func()) func() {
	return func() { g.Do(name, fn) }
}

// Hash returns a short hash of a seed's ledger and counters, the same on
// every run of a seed whose history replays: leaderships in order of
// start (then node and term), with their exact virtual times.
func Hash(ts []Tenure, counts map[string]int) string {
	h := sha256.New()
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(a, b Tenure) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Term, b.Term))
	})
	for _, tn := range ts {
		fmt.Fprintf(h, "%s %d %d %d\n", tn.Node, tn.Term, tn.Start.UnixNano(), endNanos(tn.End))
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(h, "%s=%d\n", k, counts[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func endNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
