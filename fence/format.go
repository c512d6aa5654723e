package fence

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The object format (docs/fencing.md, "Object format"): one header line,
// then the caller's bytes unchanged.
//
//	s3lect-fence/1 term=7 write=<32 hex digits> prev=<32 hex digits or -> state=data
//	<the caller's bytes>
//
// write is a random ID that no other write carries: it makes every fenced
// body unique, so that on a store whose ETag hashes the body (S3 and the
// stores compatible with it) every fenced write gets an ETag no earlier
// version had, and a stale If-Match can never match again. prev is the
// write ID of the version this one replaced ("-" when it replaced nothing
// or an object written outside the fence); a writer whose reply was lost
// finds its write there if another write landed on top of it. state is
// "data" or "deleted" (a tombstone: it keeps the term after a Delete).
const magic = "s3lect-fence/"

// version is one object as the fence sees it.
type version struct {
	etag    string // "" when the key is absent
	term    uint64 // 0 for an absent key or an object written outside the fence
	write   string // "" for an absent key or an object written outside the fence
	prev    string
	deleted bool
	data    []byte
	fenced  bool // the object carries a fence header
}

// newWriteID returns 16 random bytes in hex.
func newWriteID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// encode returns the body that stores data (or a tombstone) for term.
func encode(term uint64, write, prev string, deleted bool, data []byte) []byte {
	state := "data"
	if deleted {
		state = "deleted"
		data = nil
	}
	if prev == "" {
		prev = "-"
	}
	b := make([]byte, 0, 120+len(data))
	b = fmt.Appendf(b, "%s1 term=%d write=%s prev=%s state=%s\n", magic, term, write, prev, state)
	return append(b, data...)
}

// decode parses a stored body. An object that does not start with the
// fence's magic was written outside the fence: it is data of term 0. One
// that starts with it but does not parse is an error, never term 0: its
// header may hide a higher term.
func decode(body []byte) (version, error) {
	if !bytes.HasPrefix(body, []byte(magic)) {
		return version{data: body}, nil
	}
	line, data, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return version{}, fmt.Errorf("the object starts with %q but has no header line end", magic)
	}
	f := strings.Fields(string(line))
	if len(f) != 5 || f[0] != magic+"1" {
		if len(f) > 0 && f[0] != magic+"1" {
			return version{}, fmt.Errorf("the object's header names format %q; this version reads %q only (a newer s3lect wrote it?)", f[0], magic+"1")
		}
		return version{}, fmt.Errorf("malformed fence header %q", line)
	}
	v := version{fenced: true, data: data}
	var err error
	if v.term, err = strconv.ParseUint(strings.TrimPrefix(f[1], "term="), 10, 64); err != nil || !strings.HasPrefix(f[1], "term=") || v.term == 0 {
		return version{}, fmt.Errorf("malformed fence header %q: bad term", line)
	}
	if v.write = strings.TrimPrefix(f[2], "write="); !isID(v.write) || !strings.HasPrefix(f[2], "write=") {
		return version{}, fmt.Errorf("malformed fence header %q: bad write ID", line)
	}
	if v.prev = strings.TrimPrefix(f[3], "prev="); !strings.HasPrefix(f[3], "prev=") || (v.prev != "-" && !isID(v.prev)) {
		return version{}, fmt.Errorf("malformed fence header %q: bad prev", line)
	}
	if v.prev == "-" {
		v.prev = ""
	}
	switch f[4] {
	case "state=data":
	case "state=deleted":
		v.deleted = true
		if len(data) > 0 {
			return version{}, fmt.Errorf("malformed fence header %q: a tombstone with %d bytes of data", line, len(data))
		}
	default:
		return version{}, fmt.Errorf("malformed fence header %q: bad state", line)
	}
	return v, nil
}

func isID(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
