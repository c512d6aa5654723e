package s3lect

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3lect/s3lect/store"
)

// lockfileSeeds are records as they appear in the wild: ours, the original
// s3lect's, released ones, and damaged ones.
var lockfileSeeds = []string{
	`{"leaderID":"server-001","leaderAddr":"10.0.1.42:8443","lastUpdated":"2026-11-22T10:30:45.123456789Z","term":7}`,
	`{"leaderID":"server-001","leaderAddr":"10.0.1.42:8443","lastUpdated":"2024-10-27T10:30:45Z"}`,
	`{"leaderID":"server-001","leaderAddr":"","lastUpdated":"0001-01-01T00:00:00Z","term":7}`,
	`{"leaderID":"a","leaderAddr":"b","lastUpdated":"2026-01-01T00:00:00Z","term":1,"unknown":{"nested":[1,2]}}`,
	`{"leaderID":5}`, `{"term":-1}`, `{"term":1e30}`, `null`, `[]`, `""`, `{`, "\xff\xfe", ``,
	`{"leaderID":"x","lastUpdated":"2026-13-45T99:99:99Z"}`,
	`{"leaderID":"x","lastUpdated":"2026-01-01T00:00:00Z"} trailing`,
	`{"leaderID":"x","leaderID":"y","lastUpdated":"2026-01-01T00:00:00Z"}`,
}

func FuzzParseRecord(f *testing.F) {
	for _, s := range lockfileSeeds {
		f.Add([]byte(s))
	}
	f.Add(bytes.Repeat([]byte("["), 100000))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ParseRecord(data)
		if err != nil {
			if !errors.Is(err, errInvalidRecord) {
				t.Fatalf("ParseRecord error %v does not wrap errInvalidRecord", err)
			}
			if !strings.HasPrefix(err.Error(), "s3lect: ") {
				t.Fatalf("ParseRecord error %q is not prefixed s3lect:", err)
			}
			_ = salvageTerm(data) // must not panic either
			return
		}
		if len(data) > store.MaxObjectSize {
			t.Fatalf("ParseRecord accepted %d bytes, over MaxObjectSize", len(data))
		}
		if rec.LeaderID == "" {
			t.Fatal("ParseRecord accepted a record without leaderID")
		}
		// What we accept, we can write back and read again unchanged.
		again, err := ParseRecord(rec.encode())
		if err != nil || again.LeaderID != rec.LeaderID || again.Term != rec.Term ||
			again.LeaderAddr != rec.LeaderAddr || !again.LastUpdated.Equal(rec.LastUpdated) {
			t.Fatalf("round trip of %+v gave %+v, %v", rec, again, err)
		}
		// And a view of it classifies without panicking.
		v := view{}.observe(data, `"e"`, time.Now())
		if v.kind != kindHeld && v.kind != kindVacant {
			t.Fatalf("valid record observed as kind %d", v.kind)
		}
	})
}

func FuzzPeerAnswer(f *testing.F) {
	for _, s := range lockfileSeeds {
		f.Add([]byte(s), "server-001", uint64(7))
	}
	ok, _ := json.Marshal(peerRecord{Record: Record{LeaderID: "L", LeaderAddr: "h:1", LastUpdated: time.Unix(1, 0).UTC(), Term: 3}, ETag: `"abc"`})
	f.Add(ok, "L", uint64(3))
	f.Add(bytes.Repeat([]byte(" "), maxPeerBody+1), "L", uint64(3))
	f.Fuzz(func(t *testing.T, body []byte, id string, term uint64) {
		rec, _, err := decodePeerAnswer(body, id, term, "")
		if err != nil {
			return
		}
		switch {
		case len(body) > maxPeerBody:
			t.Fatalf("accepted a %d-byte answer", len(body))
		case rec.LeaderID != id || rec.Term != term:
			t.Fatalf("accepted %q term %d while expecting %q term %d", rec.LeaderID, rec.Term, id, term)
		case rec.LastUpdated.IsZero():
			t.Fatal("accepted a released record as a live leader")
		}
	})
}
