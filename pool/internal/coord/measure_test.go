package coord

import (
	"container/heap"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

// The figures of the pool in virtual time, at the defaults (FrequentInterval
// 5 s, LeaderTimeout 15 s), store latencies of 2 to 40 ms and no faults:
//
//	go test ./pool/internal/coord -run '^$' -bench BenchmarkFigures -benchtime 1x

// step runs the events due up to t.
func (s *sim) step(t time.Duration) {
	for len(s.q) > 0 && s.q[0].at <= t {
		ev := heap.Pop(&s.q).(*event)
		if !s.deliver(ev) {
			return
		}
	}
	s.now = t
}

// waitFor runs until cond holds, checking every 20 ms, for at most limit;
// it returns how long that took.
func (s *sim) waitFor(limit time.Duration, cond func() bool) (time.Duration, bool) {
	start := s.now
	for s.now-start <= limit {
		if cond() {
			return s.now - start, true
		}
		s.step(s.now + 20*time.Millisecond)
	}
	return s.now - start, false
}

// balanced reports whether every shard is led once and every running
// worker leads ⌊N/W⌋ or ⌈N/W⌉.
func (s *sim) balanced() bool {
	if !s.allLed() {
		return false
	}
	var up []*proc
	for _, p := range s.procs {
		if p.up {
			up = append(up, p)
		}
	}
	lo := len(s.shards) / len(up)
	for _, p := range up {
		n := 0
		for _, l := range p.ls {
			if s.live(p, l) {
				n++
			}
		}
		if n < lo || n > lo+1 {
			return false
		}
	}
	return true
}

type figures struct {
	cold, crash, coordCrash, join, leave []float64 // in LeaderTimeouts
	workerPuts, workerGets, coordReads   []float64 // per FrequentInterval
	joinMoves                            []float64
	restartBack                          []float64 // the share of its shards a restarted worker got back
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys[len(ys)/2]
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	return slices.Max(xs)
}

// measure plays one seed of the scenario: a cold start, a steady state,
// a worker's crash, the coordinator's crash, a join and a leave.
func measure(t testing.TB, seed uint64, workers, shards int, f *figures) {
	planCheck = nil // a plan from scratch at every event would be what is measured
	defer func() { planCheck = (*Coordinator).checkIndex }()
	tm := timing{5 * time.Second, 15 * time.Second}
	s := newSim(seed, simConfig{workers: 0, shards: shards, timing: &tm, noLog: true, maxWorkers: workers + 1, peer: *simPeerFigures})
	s.calm = true // no faults, no lost replies, no slow calls
	for range workers {
		s.addProc()
	}
	lt := tm.lt.Seconds()
	limit := 10 * tm.lt
	if d, ok := s.waitFor(limit, s.balanced); ok {
		f.cold = append(f.cold, d.Seconds()/lt)
	} else {
		t.Fatalf("seed %d: %d workers over %d shards not balanced %v after a cold start", seed, workers, shards, limit)
	}
	s.step(s.now + 2*tm.lt)
	// Steady state: the requests of 10 intervals.
	before := map[*proc]map[string]int{}
	for _, p := range s.procs {
		before[p] = map[string]int{"put": p.calls["put"], "get": p.calls["get"], "list": p.calls["list"]}
	}
	s.step(s.now + 10*tm.fi)
	coordinator := s.holder
	var puts, gets float64
	n := 0
	for _, p := range s.procs {
		dp, dg, dl := p.calls["put"]-before[p]["put"], p.calls["get"]-before[p]["get"], p.calls["list"]-before[p]["list"]
		if p == coordinator {
			f.coordReads = append(f.coordReads, float64(dl+dg)/10)
			continue
		}
		puts += float64(dp)
		gets += float64(dg)
		n++
	}
	f.workerPuts = append(f.workerPuts, puts/float64(n)/10)
	f.workerGets = append(f.workerGets, gets/float64(n)/10)
	// A worker's crash, at a phase drawn from the seed.
	s.step(s.now + s.dur(0, tm.fi))
	victim := s.procs[0]
	if victim == coordinator {
		victim = s.procs[1]
	}
	s.kill(victim)
	if d, ok := s.waitFor(limit, s.allLed); ok {
		f.crash = append(f.crash, d.Seconds()/lt)
	} else {
		t.Fatalf("seed %d: shards not led again %v after a worker's crash", seed, limit)
	}
	s.waitFor(limit, s.balanced)
	s.step(s.now + s.dur(0, tm.fi))
	s.kill(coordinator)
	if d, ok := s.waitFor(limit, s.allLed); ok {
		f.coordCrash = append(f.coordCrash, d.Seconds()/lt)
	} else {
		t.Fatalf("seed %d: shards not led again %v after the coordinator's crash", seed, limit)
	}
	s.waitFor(limit, s.balanced)
	starts := s.starts
	s.addProc()
	if d, ok := s.waitFor(limit, s.balanced); ok {
		f.join = append(f.join, d.Seconds()/lt)
		f.joinMoves = append(f.joinMoves, float64(s.starts-starts))
	} else {
		t.Fatalf("seed %d: not balanced %v after a join", seed, limit)
	}
	s.step(s.now + s.dur(0, tm.fi))
	leaver := s.procs[len(s.procs)-1]
	s.wdo(leaver, leaver.w.Leave(leaver.local(s.now)))
	if d, ok := s.waitFor(limit, func() bool { return !leaver.up && s.allLed() }); ok {
		f.leave = append(f.leave, d.Seconds()/lt)
	} else {
		t.Fatalf("seed %d: shards not led again %v after a leave", seed, limit)
	}
	// A worker restarted with its ID (a crash, then a new process at once).
	s.waitFor(limit, s.balanced)
	back := s.procs[1]
	if !back.up || back == s.holder {
		back = s.procs[2]
	}
	had := sortedKeys(back.ls)
	s.kill(back)
	s.start(back)
	if _, ok := s.waitFor(limit, s.balanced); !ok {
		t.Fatalf("seed %d: not balanced %v after a restart", seed, limit)
	}
	got := 0
	for _, sh := range had {
		if l := back.ls[sh]; l != nil && s.live(back, l) {
			got++
		}
	}
	f.restartBack = append(f.restartBack, float64(got)/float64(max(len(had), 1)))
	if len(s.fails) > 0 {
		t.Fatalf("seed %d: %v", seed, s.fails)
	}
}

// BenchmarkFigures prints the figures; each iteration plays every
// scenario once more.
func BenchmarkFigures(b *testing.B) {
	for b.Loop() {
		figuresOnce(b)
	}
}

func figuresOnce(t testing.TB) {
	for _, c := range []struct{ workers, shards, seeds int }{{10, 100, 21}, {30, 300, 11}, {100, 1000, 5}} {
		var f figures
		for seed := range c.seeds {
			measure(t, uint64(seed+1), c.workers, c.shards, &f)
		}
		fmt.Printf("%d workers, %d shards, %d seeds (LeaderTimeout 15 s, FrequentInterval 5 s):\n", c.workers, c.shards, c.seeds)
		fmt.Printf("  cold start balanced: median %.2f, max %.2f LeaderTimeouts\n", median(f.cold), maxOf(f.cold))
		fmt.Printf("  worker crash, shards led again: median %.2f, max %.2f\n", median(f.crash), maxOf(f.crash))
		fmt.Printf("  coordinator crash, shards led again: median %.2f, max %.2f\n", median(f.coordCrash), maxOf(f.coordCrash))
		fmt.Printf("  join balanced: median %.2f, max %.2f; leaderships started %.0f (median)\n", median(f.join), maxOf(f.join), median(f.joinMoves))
		fmt.Printf("  leave (drain 0 to 2.5 s), shards led again: median %.2f, max %.2f\n", median(f.leave), maxOf(f.leave))
		fmt.Printf("  a worker restarted with its ID got back %.0f%% of its shards (median)\n", 100*median(f.restartBack))
		fmt.Printf("  steady state per worker per interval: %.2f PUT, %.2f GET; coordinator's reads %.2f\n", median(f.workerPuts), median(f.workerGets), median(f.coordReads))
	}
}

var simScale = flag.String("sim.scale", "100x10000", "BenchmarkScale's pool, WORKERSxSHARDS: a cold start and a steady state in virtual time")

// BenchmarkScale starts a large pool in virtual time at the defaults and
// reports when it is balanced and what the steady state costs:
//
//	go test ./pool/internal/coord -run '^$' -bench BenchmarkScale -benchtime 1x -sim.scale 300x30000
func BenchmarkScale(b *testing.B) {
	for b.Loop() {
		scaleOnce(b)
	}
}

func scaleOnce(t testing.TB) {
	planCheck = nil
	defer func() { planCheck = (*Coordinator).checkIndex }()
	var workers, shards int
	if _, err := fmt.Sscanf(*simScale, "%dx%d", &workers, &shards); err != nil {
		t.Fatalf("-sim.scale %q: want WORKERSxSHARDS", *simScale)
	}
	tm := timing{5 * time.Second, 15 * time.Second}
	s := newSim(1, simConfig{shards: shards, timing: &tm, noLog: true, maxWorkers: workers})
	s.calm = true
	for range workers {
		s.addProc()
	}
	start, cpu0 := time.Now(), cpuTime()
	d, ok := s.waitFor(10*tm.lt, s.balanced)
	if !ok {
		t.Fatalf("%d workers over %d shards not balanced %v after a cold start", workers, shards, d)
	}
	t.Logf("%d workers over %d shards: balanced %.2f LeaderTimeouts after a cold start (%v of CPU, %v of wall time)", workers, shards, d.Seconds()/tm.lt.Seconds(),
		(cpuTime() - cpu0).Round(time.Second), time.Since(start).Round(time.Second))
	s.step(s.now + 2*tm.lt)
	before := map[*proc][3]int{}
	for _, p := range s.procs {
		before[p] = [3]int{p.calls["put"], p.calls["get"], p.calls["list"]}
	}
	s.step(s.now + 10*tm.fi)
	var puts, gets, n int
	for _, p := range s.procs {
		b := before[p]
		if p == s.holder {
			t.Logf("the coordinator: %.2f listings and %.2f reads per interval", float64(p.calls["list"]-b[2])/10, float64(p.calls["get"]-b[1])/10)
			continue
		}
		puts, gets, n = puts+p.calls["put"]-b[0], gets+p.calls["get"]-b[1], n+1
	}
	t.Logf("per worker per interval: %.2f PUT, %.2f GET", float64(puts)/float64(n)/10, float64(gets)/float64(n)/10)
	largest, key := 0, ""
	for k, o := range s.store {
		if len(o.data) > largest {
			largest, key = len(o.data), k
		}
	}
	t.Logf("the largest object: %s, %d bytes (store.MaxObjectSize %d); CPU in all %v, the coordinator's decisions included", key, largest, store.MaxObjectSize, (cpuTime() - cpu0).Round(time.Second))
	if largest >= store.MaxObjectSize {
		t.Errorf("object %s is %d bytes, over store.MaxObjectSize", key, largest)
	}
	if len(s.fails) > 0 {
		t.Fatal(s.fails)
	}
}
