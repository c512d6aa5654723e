package coord

// A small scripted harness of the sixth pool review (docs/findings-pool.md,
// "Sixth review"): real Worker and Coordinator cores, a store of objects
// with an ETag per write, one fixed latency, no randomness, and Work whose
// drain time the test chooses.

import (
	"container/heap"
	"fmt"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

type r6obj struct {
	data []byte
	etag string
}

type scriptLead struct {
	term     uint64
	deadline time.Time
	ended    bool
}

type scriptWorker struct {
	id    string
	w     *Worker
	up    bool
	tok   int
	leads map[string]*scriptLead
	drain func(shard string, cause error) time.Duration
}

type scriptEvent struct {
	at  time.Duration
	seq int
	fn  func()
}

type scriptHeap []*scriptEvent

func (h scriptHeap) Len() int { return len(h) }
func (h scriptHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h scriptHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *scriptHeap) Push(x any)   { *h = append(*h, x.(*scriptEvent)) }
func (h *scriptHeap) Pop() any {
	o := *h
	e := o[len(o)-1]
	*h = o[:len(o)-1]
	return e
}

type script struct {
	t       *testing.T
	fi, lt  time.Duration
	lat     time.Duration
	now     time.Duration
	q       scriptHeap
	seq     int
	etags   int
	store   map[string]*r6obj
	ws      map[string]*scriptWorker
	order   []string
	c       *Coordinator
	cTok    int
	cTimer  int // the coordinator's timer in force: earlier ones are dropped
	shards  []string
	fails   []string
	lastLed map[string]time.Duration // when each shard was last seen led (live)
	// pagePut, if set, answers the coordinator's page writes instead of
	// the store (a gray failure: nil lets the write through).
	pagePut func(id string) error
	// sessionGet, likewise, answers the coordinator's session reads.
	sessionGet func(id string) error
	// sessionPut, if set, fails a worker's session writes (a worker cut
	// off the store: nil lets the write through).
	sessionPut func(id string) error
	// steppedDown, if set, is called when the coordinator steps down
	// (else a step-down is a failure of the test).
	steppedDown func(err error)
	maxTerm     map[string]uint64
	names       []string // every shard name to check, if not only shards
	// listLat, if set, is how long the coordinator's listing takes to
	// land (a paged LIST of a large pool), instead of lat.
	listLat time.Duration
}

func newScript(t *testing.T, fi, lt time.Duration, shards []string) *script {
	return &script{t: t, fi: fi, lt: lt, lat: 10 * time.Millisecond, store: map[string]*r6obj{}, ws: map[string]*scriptWorker{},
		shards: shards, lastLed: map[string]time.Duration{}}
}

func (h *script) at(d time.Duration, fn func()) {
	h.seq++
	heap.Push(&h.q, &scriptEvent{at: d, seq: h.seq, fn: fn})
}

func (h *script) local() time.Time { return at(h.now) }

func (h *script) run(until time.Duration) {
	for len(h.q) > 0 && h.q[0].at <= until {
		ev := heap.Pop(&h.q).(*scriptEvent)
		h.now = ev.at
		ev.fn()
		h.check()
	}
	h.now = until
}

func (h *script) get(key string) ([]byte, string) {
	if o := h.store[key]; o != nil && o.data != nil {
		return o.data, o.etag
	}
	return nil, ""
}

func (h *script) put(key string, data []byte, ifMatch string, cond bool) (string, error) {
	_, cur := h.get(key)
	if cond && cur != ifMatch {
		return "", store.ErrPreconditionFailed
	}
	h.etags++
	tag := fmt.Sprintf("e%d", h.etags)
	h.store[key] = &r6obj{data: data, etag: tag}
	return tag, nil
}

// live reports whether l is a live leadership now.
func (h *script) live(w *scriptWorker, l *scriptLead) bool {
	return w.up && !l.ended && h.local().Before(l.deadline)
}

func (h *script) check() {
	names := h.shards
	if h.names != nil {
		names = h.names
	}
	for _, sh := range names {
		var owners []string
		for _, id := range h.order {
			w := h.ws[id]
			if l := w.leads[sh]; l != nil && h.live(w, l) {
				owners = append(owners, fmt.Sprintf("%s@%d", id, l.term))
			}
		}
		if len(owners) > 0 {
			h.lastLed[sh] = h.now
		}
		if len(owners) > 1 {
			h.fails = append(h.fails, fmt.Sprintf("t=%v shard %s: two live owners %v", h.now, sh, owners))
		}
	}
}

// led reports the shards led now.
func (h *script) led() map[string]bool {
	out := map[string]bool{}
	for _, id := range h.order {
		w := h.ws[id]
		for sh, l := range w.leads {
			if h.live(w, l) {
				out[sh] = true
			}
		}
	}
	return out
}

func (h *script) addWorker(id string, drain func(string, error) time.Duration) *scriptWorker {
	n := 0
	w := &scriptWorker{id: id, up: true, leads: map[string]*scriptLead{}, drain: drain}
	w.w = NewWorker(WorkerConfig{ID: id, FrequentInterval: h.fi, LeaderTimeout: h.lt,
		NewSession: func() string { n++; return fmt.Sprintf("%s.%d", id, n) }})
	h.ws[id] = w
	h.order = append(h.order, id)
	h.wdo(w, w.w.Start(h.local()))
	return w
}

func (h *script) kill(w *scriptWorker) {
	w.up = false
	w.tok++
	w.leads = map[string]*scriptLead{}
}

func (h *script) wdo(w *scriptWorker, fx []Effect) {
	if !w.up {
		return
	}
	for _, e := range fx {
		switch e.Op {
		case OpTimer:
			w.tok++
			tok := w.tok
			h.at(max(e.At.Sub(t0), h.now), func() {
				if w.up && w.tok == tok {
					h.wdo(w, w.w.Tick(h.local()))
				}
			})
		case OpGetSession:
			key := "workers/" + w.id
			h.at(h.now+h.lat, func() {
				d, tag := h.get(key)
				h.at(h.now+h.lat, func() { h.wdo(w, w.w.SessionRead(h.local(), d, tag, nil)) })
			})
		case OpPutSession:
			key, data, im, sent := "workers/"+w.id, e.Data, e.IfMatch, h.local()
			if h.sessionPut != nil {
				if err := h.sessionPut(w.id); err != nil {
					// Cut off the store: the write times out, unsent.
					h.at(h.now+h.fi, func() { h.wdo(w, w.w.SessionPut(h.local(), sent, "", err)) })
					break
				}
			}
			h.at(h.now+h.lat, func() {
				if !w.up {
					return
				}
				tag, err := h.put(key, data, im, true)
				h.at(h.now+h.lat, func() { h.wdo(w, w.w.SessionPut(h.local(), sent, tag, err)) })
			})
		case OpPutNews:
			key, data := "news/"+w.id, e.Data
			h.at(h.now+h.lat, func() {
				if w.up {
					h.put(key, data, "", false)
				}
			})
		case OpGetPage:
			key := "assign/" + w.id
			h.at(h.now+h.lat, func() {
				d, tag := h.get(key)
				h.at(h.now+h.lat, func() { h.wdo(w, w.w.PageRead(h.local(), d, tag, nil)) })
			})
		case OpStart:
			if h.maxTerm == nil {
				h.maxTerm = map[string]uint64{}
			}
			if e.Term <= h.maxTerm[e.Shard] {
				h.fails = append(h.fails, fmt.Sprintf("t=%v shard %s: %s starts term %d after %d", h.now, e.Shard, w.id, e.Term, h.maxTerm[e.Shard]))
			}
			h.maxTerm[e.Shard] = max(h.maxTerm[e.Shard], e.Term)
			w.leads[e.Shard] = &scriptLead{term: e.Term, deadline: e.At}
		case OpExtend:
			for _, l := range w.leads {
				if !l.ended {
					l.deadline = e.At
				}
			}
		case OpStop:
			if l := w.leads[e.Shard]; l != nil && !l.ended {
				l.ended = true
				sh := e.Shard
				h.at(h.now+w.drain(sh, e.Err), func() {
					if w.up {
						delete(w.leads, sh)
						h.wdo(w, w.w.WorkDone(h.local(), sh))
					}
				})
			}
		}
	}
}

// elect starts an era of term with a coordinator of its own (the
// election's guarantee is the test's: the previous era is over).
func (h *script) elect(term uint64) {
	h.cTok++
	h.c = NewCoordinator(CoordConfig{Shards: h.shards, FrequentInterval: h.fi, LeaderTimeout: h.lt, Mark: fmt.Sprintf("m%d", term)}, term)
	h.cdo(h.c, h.cTok, h.c.Tick(h.local()))
}

// depose ends the current era (its process killed or its lease over).
func (h *script) depose() { h.cTok++; h.c = nil }

func (h *script) cdo(c *Coordinator, tok int, fx []Effect) {
	for _, e := range fx {
		if h.cTok != tok {
			return
		}
		deliver := func(f func() []Effect) {
			h.at(h.now+h.lat, func() {
				if h.cTok == tok {
					h.cdo(c, tok, f())
				}
			})
		}
		switch e.Op {
		case OpTimer:
			h.cTimer++
			timer := h.cTimer
			h.at(max(e.At.Sub(t0), h.now), func() {
				if h.cTok == tok && h.cTimer == timer {
					h.cdo(c, tok, c.Tick(h.local()))
				}
			})
		case OpList:
			land := h.lat
			if h.listLat > 0 {
				land = h.listLat
			}
			h.at(h.now+land, func() {
				m := map[string]Entry{}
				for k, o := range h.store {
					if id, ok := cutPrefix(k, "workers/"); ok {
						en := m[id]
						en.Session = o.etag
						m[id] = en
					} else if id, ok := cutPrefix(k, "news/"); ok {
						en := m[id]
						en.News = o.etag
						m[id] = en
					}
				}
				deliver(func() []Effect { return c.Listed(h.local(), m, nil) })
			})
		case OpGetSession:
			id := e.Key
			h.at(h.now+h.lat, func() {
				if h.sessionGet != nil {
					if err := h.sessionGet(id); err != nil {
						h.at(h.now+h.fi-h.lat, func() {
							if h.cTok == tok {
								h.cdo(c, tok, c.SessionRead(h.local(), id, nil, "", err))
							}
						})
						return
					}
				}
				d, tag := h.get("workers/" + id)
				deliver(func() []Effect { return c.SessionRead(h.local(), id, d, tag, nil) })
			})
		case OpGetPage:
			id := e.Key
			h.at(h.now+h.lat, func() {
				d, tag := h.get("assign/" + id)
				deliver(func() []Effect { return c.PageRead(h.local(), id, d, tag, nil) })
			})
		case OpPutPage:
			id, data, im := e.Key, e.Data, e.IfMatch
			h.at(h.now+h.lat, func() {
				if h.pagePut != nil {
					if err := h.pagePut(id); err != nil {
						// Failed as a timeout does: a FrequentInterval after the send.
						h.at(h.now+h.fi-h.lat, func() {
							if h.cTok == tok {
								h.cdo(c, tok, c.PagePut(h.local(), id, "", err))
							}
						})
						return
					}
				}
				tag, err := h.put("assign/"+id, data, im, true)
				deliver(func() []Effect { return c.PagePut(h.local(), id, tag, err) })
			})
		case OpGetRoster:
			h.at(h.now+h.lat, func() {
				d, tag := h.get("departed")
				deliver(func() []Effect { return c.RosterRead(h.local(), d, tag, nil) })
			})
		case OpPutRoster:
			data, im := e.Data, e.IfMatch
			h.at(h.now+h.lat, func() {
				tag, err := h.put("departed", data, im, true)
				deliver(func() []Effect { return c.RosterPut(h.local(), tag, err) })
			})
		case OpStepDown:
			h.depose()
			if h.steppedDown != nil {
				h.steppedDown(e.Err)
				return
			}
			h.fails = append(h.fails, fmt.Sprintf("t=%v the coordinator stepped down: %v", h.now, e.Err))
		}
	}
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// running returns the shards whose Work runs with a live leadership, by
// the worker core's own state.
func (sw *scriptWorker) running() map[string]uint64 {
	out := map[string]uint64{}
	for s, t := range sw.w.running {
		if !sw.w.stopping[s] {
			out[s] = t
		}
	}
	return out
}

// unled returns those of shards that no live leadership runs now.
func (h *script) unled(shards map[string]uint64) []string {
	led := h.led()
	var out []string
	for _, sh := range sortedKeys(shards) {
		if !led[sh] {
			out = append(out, sh)
		}
	}
	return out
}

// ledAgain runs on, in steps of 100 ms until limit, until every one of
// shards is led, and returns how long after from that was (-1: not by
// limit).
func (h *script) ledAgain(shards map[string]uint64, from, limit time.Duration) time.Duration {
	for d := h.now; d < limit; d += 100 * time.Millisecond {
		h.run(d)
		if len(h.unled(shards)) == 0 {
			return d - from
		}
	}
	return -1
}
