package coord

import (
	"fmt"
	"testing"
	"time"
)

// TestDeadSessionIsOverWhenListingAndReadQuoteETagsDifferently: the
// coordinator takes a listing's ETag and a read's for the same thing
// (4.3: a sighting "in a listing or a read"). A store, gateway or proxy
// that lists ETags in another form than GET returns them (quoted, a W/
// prefix, upper-case hex) must not make every listing of an unchanged
// object look like a change: no session would ever be silent, and a dead
// worker's shards would never be led again. ETags are compared in one
// form (sameForm), and the first pair of forms is kept for the
// executor's one warning.
//
// Schedule (core level; era 1, workers w1 and w2 on shards a to d,
// FrequentInterval 1 s, LeaderTimeout 3 s): both workers apply their
// grants; w1 then stops renewing (its object stays at ETag g1), w2 renews
// every second. Every second a listing shows w1's key as "\"g1\"" (the
// read gives g1). w1's shards must go to w2 as with one form (6.6 s, as
// in TestCoordinatorFreesADeadSessionsShardsOnlyAfterAFreshRead); before
// the rule they had not after 30 s.
func TestDeadSessionIsOverWhenListingAndReadQuoteETagsDifferently(t *testing.T) {
	c, g := grantedCoordinator(t)
	w1 := session("w1", "s1", 3, Ver{1, 3}, g["w1"])
	c.SessionRead(at(3500*time.Millisecond), "w1", w1, "g1", nil)
	c.SessionRead(at(3500*time.Millisecond), "w2", session("w2", "s2", 3, Ver{1, 4}, g["w2"]), "g2", nil)
	seq := uint64(3)
	var fx []Effect
	took := time.Duration(-1)
	for d := 4 * time.Second; d <= 34*time.Second && took < 0; d += 100 * time.Millisecond {
		now := at(d)
		if d%time.Second == 0 {
			seq++
			fx = append(fx, c.Listed(now, map[string]Entry{"w1": {Session: `"g1"`}, "w2": {Session: fmt.Sprintf("h%d", seq)}}, nil)...)
		} else {
			fx = append(fx, c.Tick(now)...)
		}
		var next []Effect
		for _, e := range fx {
			switch {
			case e.Op == OpGetSession && e.Key == "w1":
				next = append(next, c.SessionRead(now, "w1", w1, "g1", nil)...)
			case e.Op == OpGetSession && e.Key == "w2":
				next = append(next, c.SessionRead(now, "w2", session("w2", "s2", seq, Ver{1, 4}, g["w2"]), fmt.Sprintf("h%d", seq), nil)...)
			case e.Op == OpPutPage && e.Key == "w2":
				if p, err := ParsePage(e.Data, "w2"); err == nil && len(p.Shards) == 4 {
					took = d
				}
				next = append(next, c.PagePut(now, "w2", fmt.Sprintf("r%d", d), nil)...)
			}
		}
		fx = next
	}
	if took < 0 || took > 10*time.Second {
		t.Errorf("w1 stopped renewing at 3.5 s; its shards went to w2 at %v (-1: not in 34 s); with one ETag form it takes 6.6 s; %s", took, c.debug(at(34*time.Second)))
	}
	if listed, read := c.ETagForms(); listed != `"g1"` || read != "g1" {
		t.Errorf("ETagForms() = %q, %q; want the listed and the read form of w1's ETag, for the executor's warning", listed, read)
	}
}

// TestSameFormTakesTheFormsOfOneETagAsOne: the forms stores give one
// ETag in are one; distinct ETags stay distinct (case counts where the
// ETag is not hex).
func TestSameFormTakesTheFormsOfOneETagAsOne(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`"9b2cf535f27731c974343645a3985328"`, "9b2cf535f27731c974343645a3985328", true},
		{`W/"9B2CF535F27731C974343645A3985328"`, "9b2cf535f27731c974343645a3985328", true},
		{`"9b2cf535f27731c974343645a3985328-3"`, "9B2CF535F27731C974343645A3985328-3", true},
		{"0x8DC2F1A2B3C4D5E", `"0x8dc2f1a2b3c4d5e"`, true},
		{"CJTXk9PwqYwDEAE=", "cjtxk9pwqywdeae=", false},
		{"1712345678901234", "1712345678901235", false},
		{"", `""`, true},
		{"abc", "abd", false},
	} {
		if got := sameForm(c.a) == sameForm(c.b); got != c.same {
			t.Errorf("sameForm(%q) == sameForm(%q) is %v; want %v", c.a, c.b, got, c.same)
		}
	}
}

// TestOneFormTellsTheFormsOfETagsApart: the executor's warning names a
// store that lists ETags in another form than it reads them; two ETags
// of one object in time (written since) in one form raise none.
func TestOneFormTellsTheFormsOfETagsApart(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`"9b2cf535"`, `"1d3f0a71"`, true},
		{"12", "13", true},
		{`"9b2cf535"`, "1d3f0a71", false},
		{`W/"9b2cf535"`, `"9b2cf535"`, false},
		{"9B2CF535", "1d3f0a71", false},
		{"0x8DC2F1A2", "0x8DC2F1A3", true},
	} {
		if got := oneForm(c.a, c.b); got != c.same {
			t.Errorf("oneForm(%q, %q) = %v; want %v", c.a, c.b, got, c.same)
		}
	}
}
