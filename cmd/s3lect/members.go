package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/s3lect/s3lect"
)

// In peer mode the runners of a group know one another: each follower
// says its ID to the leader's peer endpoint every FrequentInterval
// (membersPath, with id), and the leading runner answers who has, so that
// s3lect release -to refuses an ID nobody runs before it stops the job.
// In storage mode nobody can know: release says so before it acts.
const membersPath = "/s3lect/members"

// memberList is membersPath's answer.
type memberList struct {
	Leader   string   `json:"leader"`   // the runner that answers, while it leads; "" otherwise
	Members  []string `json:"members"`  // IDs heard from within the last three FrequentIntervals, the leader's own included
	Complete bool     `json:"complete"` // it has led for long enough to have heard from every live follower
}

// members is the leading runner's list of the group's members.
type members struct {
	id, key string
	fi      time.Duration
	leader  func() (s3lect.Record, bool) // the elector's Leader
	now     func() time.Time

	mu      sync.Mutex
	seen    map[string]time.Time
	leading time.Time // since when this runner has led term, as members first saw it
	term    uint64
}

func newMembers(id, key string, fi time.Duration, e *s3lect.Elector) *members {
	return &members{id: id, key: key, fi: fi, leader: e.Leader, now: time.Now, seen: map[string]time.Time{}}
}

// list answers who is a member, as this runner knows it, given whether
// it leads, and in which term. The list is complete once it has led that
// term for two FrequentIntervals: every live follower has announced
// itself to it since.
func (m *members) list(leads bool, term uint64) memberList {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if !leads {
		return memberList{}
	}
	if term != m.term {
		m.term, m.leading = term, now
	}
	l := memberList{Leader: m.id, Members: []string{m.id}, Complete: now.Sub(m.leading) >= 2*m.fi}
	for id, at := range m.seen {
		if now.Sub(at) <= 3*m.fi && id != m.id {
			l.Members = append(l.Members, id)
		}
	}
	slices.Sort(l.Members)
	return l
}

// ServeHTTP records the id of a follower's announcement and answers the
// list.
func (m *members) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("lockfile") != m.key {
		http.Error(w, "no runner for that lockfile here", http.StatusNotFound)
		return
	}
	if id := q.Get("id"); id != "" && len(id) <= 256 {
		m.mu.Lock()
		m.seen[id] = m.now()
		if len(m.seen) > 10000 { // bounded: forget the oldest half
			m.forgetOld()
		}
		m.mu.Unlock()
	}
	rec, ok := m.leader()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(m.list(ok && rec.LeaderID == m.id, rec.Term))
}

func (m *members) forgetOld() {
	now := m.now()
	for id, at := range m.seen {
		if now.Sub(at) > 3*m.fi {
			delete(m.seen, id)
		}
	}
}

// announce says this runner's ID to the leader's peer endpoint every
// FrequentInterval until ctx ends.
func (m *members) announce(ctx context.Context, clients *peerClients) {
	t := time.NewTicker(m.fi)
	defer t.Stop()
	for {
		if rec, ok := m.leader(); ok && rec.LeaderID != m.id && rec.LeaderAddr != "" {
			actx, cancel := context.WithTimeout(ctx, m.fi)
			fetchMembers(actx, clients.forRecord(rec), rec.LeaderAddr, m.key, m.id)
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fetchMembers asks the runner at addr who the members of key's group
// are; with id, it says that id is one.
func fetchMembers(ctx context.Context, client *http.Client, addr, key, id string) (memberList, error) {
	q := url.Values{"lockfile": {key}}
	if id != "" {
		q.Set("id", id)
	}
	u := url.URL{Scheme: "https", Host: addr, Path: membersPath, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return memberList{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return memberList{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return memberList{}, fmt.Errorf("%s answered %s (not an s3lect run of this version?)", membersPath, resp.Status)
	}
	var l memberList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return memberList{}, fmt.Errorf("%s: %w", membersPath, err)
	}
	return l, nil
}
