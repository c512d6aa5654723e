package coord

import "strings"

// A listing's ETags and a read's are compared (4.3: a sighting "in a
// listing or a read"), but stores and gateways do not all give one form
// in both (quotes, a W/ prefix, the case of hex digits): every ETag of a
// session or news object is taken in sameForm's. Pages and the roster
// go back to the store in If-Match as it gave them.

// sameForm returns etag without a W/ prefix and surrounding quotes, and
// in lower case when it is hex (an MD5, an S3 multipart "hex-N", Azure's
// 0x...): forms of one ETag that a store may give in listings and reads.
func sameForm(etag string) string {
	s := strings.TrimPrefix(etag, "W/")
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEFxX-", r) {
			return s // not hex: case may tell ETags apart
		}
	}
	return strings.ToLower(s)
}

// sameForms returns a listing's entries in sameForm, and notes the first
// key whose listed ETag is in another form than its last read returned
// (ETagForms): the object has most often been written since, so the
// forms are compared, not the ETags.
func (c *Coordinator) sameForms(entries map[string]Entry) map[string]Entry {
	out := make(map[string]Entry, len(entries))
	for _, id := range sortedKeys(entries) {
		e := entries[id]
		if k := c.keys[id]; c.forms[0] == "" && k != nil && e.Session != "" && k.readRaw != "" && !oneForm(e.Session, k.readRaw) {
			c.forms = [2]string{e.Session, k.readRaw}
		}
		out[id] = Entry{Session: sameForm(e.Session), News: sameForm(e.News)}
	}
	return out
}

// oneForm reports whether ETags a and b are given in one form: both
// weak or neither, both quoted or neither, and hex digits in one case.
func oneForm(a, b string) bool {
	form := func(s string) (weak, quoted bool, upper, lower bool) {
		weak = strings.HasPrefix(s, "W/")
		s = strings.TrimPrefix(s, "W/")
		quoted = strings.HasPrefix(s, `"`)
		if t := sameForm(s); t == strings.ToLower(t) { // hex, or case-sensitive text
			upper = strings.ContainsAny(s, "ABCDEF")
			lower = strings.ContainsAny(s, "abcdef")
		}
		return
	}
	aw, aq, au, al := form(a)
	bw, bq, bu, bl := form(b)
	return aw == bw && aq == bq && !(au && !al && bl && !bu) && !(al && !au && bu && !bl)
}

// ETagForms returns an ETag as a listing gave it and as a read returned
// it, the first time this era saw one object's ETag in two forms (both
// "" if never). The executor logs it once: the store (or a proxy in
// front of it) lists ETags otherwise than it returns them, which
// store.Lister's contract does not allow; the pool copes, but other
// tools may not.
func (c *Coordinator) ETagForms() (listed, read string) { return c.forms[0], c.forms[1] }
