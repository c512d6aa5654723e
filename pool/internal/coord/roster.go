package coord

import (
	"errors"
	"time"

	"github.com/s3lect/s3lect/store"
)

// Roster is the pool's list of departed workers, departed.json, kept by
// the coordinator so that a new era need not read the objects of every
// worker ID the pool ever had (docs/pool-protocol.md, 4.7). Each entry
// maps a worker ID to the ETag of its session object as a read showed it
// closed. An entry is a fact about that ETag, true for good whatever the
// key holds later (an ETag names one content, or one write), so a roster
// put back to an earlier version says nothing false.
type Roster struct {
	V      int               `json:"v"`
	Closed map[string]string `json:"closed"`
	MaxTTL int64             `json:"maxTTL"` // the longest lease its writer had seen, ms
}

// ParseRoster decodes a roster.
func ParseRoster(data []byte) (Roster, error) {
	return parse(data, "roster", "departed.json", func(r Roster) bool { return r.V == wireVersion })
}

type rosterState struct {
	read, reading, writing bool
	dirty                  bool
	etag                   string // as last read or written
	closed                 map[string]string
	next                   time.Time // no write before
}

// note records what a read of id's session showed: closed at etag, or not.
func (c *Coordinator) note(id, etag string, closed bool) {
	r := &c.roster
	switch old, ok := r.closed[id]; {
	case closed && old != etag:
		r.closed[id], r.dirty = etag, true
	case !closed && ok && old != etag:
		delete(r.closed, id) // the key holds something else now: keep the roster small
		r.dirty = true
	}
}

// RosterRead is the result of OpGetRoster.
func (c *Coordinator) RosterRead(now time.Time, data []byte, etag string, err error) []Effect {
	c.roster.reading = false
	if err != nil || c.down {
		return c.after(now, nil)
	}
	c.ok(OpGetRoster)
	c.roster.read, c.roster.etag = true, etag
	if r, perr := ParseRoster(data); etag != "" && perr == nil {
		for id, e := range r.Closed {
			if _, ok := c.roster.closed[id]; !ok && !c.listed {
				c.roster.closed[id] = sameForm(e) // after a refused write, ours stand
			}
		}
		if c.allRead.IsZero() {
			c.maxTTL = max(c.maxTTL, r.MaxTTL)
			c.lmax = max(c.lmax, time.Duration(r.MaxTTL)*time.Millisecond)
		}
	}
	return c.after(now, nil)
}

// RosterPut is the result of OpPutRoster.
func (c *Coordinator) RosterPut(now time.Time, etag string, err error) []Effect {
	c.roster.writing = false
	switch {
	case err == nil:
		c.ok(OpPutRoster)
		c.roster.etag = etag
	case errors.Is(err, store.ErrPreconditionFailed):
		c.roster.read, c.roster.dirty = false, true // read it, then write over it
	default:
		c.roster.dirty = true
	}
	return c.after(now, nil)
}

// rosterWrite writes the roster once it changed, at most once an
// interval. Entries beyond what one object holds are left out (those
// workers' objects are read by every era's start).
func (c *Coordinator) rosterWrite(now time.Time, fx []Effect) []Effect {
	r := &c.roster
	if !r.dirty || !r.read || r.writing || now.Before(r.next) {
		return fx
	}
	r.dirty, r.writing, r.next = false, true, now.Add(c.cfg.FrequentInterval)
	out := Roster{V: wireVersion, Closed: map[string]string{}, MaxTTL: c.maxTTL}
	size := len(Marshal(out))
	for _, id := range sortedKeys(r.closed) {
		n := len(Marshal(id)) + len(Marshal(r.closed[id])) + 2
		if size+n > store.MaxObjectSize-1024 {
			break
		}
		out.Closed[id], size = r.closed[id], size+n
	}
	return append(fx, Effect{Op: OpPutRoster, Data: Marshal(out), IfMatch: r.etag})
}
