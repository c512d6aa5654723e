package mdcheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every stated exception appears once, in one place.
//
// An exception (a case a guarantee does not cover) is stated in a spec
// page, under a heading that says "not covered", as a paragraph or list
// item that begins with an anchor of its own and a bold title:
//
//	<a id="x-restore-in-flight"></a>**A restore under a takeover's write.** ...
//
// The id starts with "x-". The check: each such id is stated once in all
// of README.md and docs/; it stands under a "not covered" heading of a
// spec page; no other page repeats its bold title (a restatement drifts
// from the rule); and the README's list of what is not guaranteed links to
// every one, so that a user reading the README sees each exception's name
// and where it is argued.

// specPages are the pages that may state exceptions.
var specPages = []string{"docs/protocol.md", "docs/fencing.md", "docs/pool-protocol.md"}

var (
	exceptionAnchor = regexp.MustCompile(`<a id="(x-[a-z0-9-]+)"></a>\s*\*\*([^*]+)\*\*`)
	exceptionLink   = regexp.MustCompile(`\]\([^)]*#(x-[a-z0-9-]+)\)`)
)

// exception is one stated exception.
type exception struct {
	id, title string
	file      string
	line      int
	heading   string // the nearest heading above it
}

// statedExceptions returns every exception anchor in pages, in file and
// line order.
func statedExceptions(pages map[string]string) []exception {
	var out []exception
	names := make([]string, 0, len(pages))
	for name := range pages {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		heading := ""
		lines := outsideCode(pages[name], false)
		for i, l := range lines {
			if headingPattern.MatchString(l) {
				heading = l
			}
			if !strings.Contains(l, `<a id="x-`) {
				continue
			}
			// A title may wrap: read on to the end of the item's paragraph.
			para := l
			for _, next := range lines[i+1 : min(i+4, len(lines))] {
				if strings.TrimSpace(next) == "" || strings.Contains(next, "<a id=") {
					break
				}
				para += " " + strings.TrimSpace(next)
			}
			for _, m := range exceptionAnchor.FindAllStringSubmatch(para, -1) {
				out = append(out, exception{id: m[1], title: strings.Join(strings.Fields(m[2]), " "), file: name, line: i + 1, heading: heading})
			}
		}
	}
	return out
}

// checkExceptions returns what is wrong with the exceptions of pages
// (README.md and docs/*.md by path).
func checkExceptions(pages map[string]string) []string {
	var bad []string
	stated := statedExceptions(pages)
	first := map[string]exception{}
	for _, x := range stated {
		if prev, ok := first[x.id]; ok {
			bad = append(bad, fmt.Sprintf("%s:%d: exception %s is stated again (first at %s:%d); state it once and link to it", x.file, x.line, x.id, prev.file, prev.line))
			continue
		}
		first[x.id] = x
		if !slices.Contains(specPages, x.file) {
			bad = append(bad, fmt.Sprintf("%s:%d: exception %s is stated outside the spec pages (%s); move it there and link to it", x.file, x.line, x.id, strings.Join(specPages, ", ")))
		}
		if !strings.Contains(strings.ToLower(x.heading), "not covered") {
			bad = append(bad, fmt.Sprintf("%s:%d: exception %s stands under %q; put it under the page's \"What is not covered\" heading", x.file, x.line, x.id, strings.TrimSpace(x.heading)))
		}
	}
	for _, x := range stated {
		bold := "**" + x.title + "**"
		for name, text := range pages {
			if name == x.file {
				continue
			}
			if strings.Contains(text, bold) {
				bad = append(bad, fmt.Sprintf("%s: repeats the title %s of exception %s (%s:%d); link to it instead", name, bold, x.id, x.file, x.line))
			}
		}
	}
	linked := map[string]bool{}
	for _, m := range exceptionLink.FindAllStringSubmatch(pages["README.md"], -1) {
		linked[m[1]] = true
		if _, ok := first[m[1]]; !ok {
			bad = append(bad, fmt.Sprintf("README.md: links to exception #%s, which no spec page states", m[1]))
		}
	}
	for _, x := range stated {
		if !linked[x.id] && first[x.id] == x {
			bad = append(bad, fmt.Sprintf("README.md: does not link to exception %s (%s:%d, %q); name it in \"What it guarantees, and what it does not\"", x.id, x.file, x.line, x.title))
		}
	}
	slices.Sort(bad)
	return bad
}

func TestExceptionsAreStatedOnce(t *testing.T) {
	pages := readPages(t)
	if len(statedExceptions(pages)) == 0 {
		t.Fatal("no page states an exception with an <a id=\"x-...\"></a> anchor; the check would pass on nothing")
	}
	for _, msg := range checkExceptions(pages) {
		t.Error(msg)
	}
}

// The check itself, on made-up pages.
func TestExceptionCheckerCatchesRepeats(t *testing.T) {
	pages := map[string]string{
		"docs/protocol.md": "# P\n\n## 12. What is not covered\n\n" +
			"- <a id=\"x-restore\"></a>**A restore in flight.** Bound: one interval.\n" +
			"- <a id=\"x-orphan\"></a>**Never linked.** Bound: none.\n\n## 13. Other\n\n" +
			"<a id=\"x-misplaced\"></a>**Out of place.** Here.\n",
		"docs/fencing.md": "# F\n\n## What is not covered\n\n<a id=\"x-restore\"></a>**Again.** Twice.\n",
		"docs/command.md": "A **A restore in flight.** restated.\n",
		"README.md":       "See [restore](docs/protocol.md#x-restore), [gone](docs/protocol.md#x-gone), [m](docs/protocol.md#x-misplaced).\n",
	}
	got := strings.Join(checkExceptions(pages), "\n")
	for _, want := range []string{
		"exception x-restore is stated again",
		"exception x-misplaced stands under",
		"docs/command.md: repeats the title **A restore in flight.**",
		"links to exception #x-gone, which no spec page states",
		"does not link to exception x-orphan",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("checkExceptions() =\n%s\nwant a line with %q", got, want)
		}
	}
	good := map[string]string{
		"docs/protocol.md": "## What is not covered\n\n<a id=\"x-a\"></a>**A.** b.\n",
		"README.md":        "[A](docs/protocol.md#x-a)\n",
	}
	if msgs := checkExceptions(good); len(msgs) != 0 {
		t.Errorf("checkExceptions(good pages) = %q; want nothing", msgs)
	}
}
