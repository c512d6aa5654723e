package mdcheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Two checks that keep the docs' claims in one place each.
//
// Exceptions. What a guarantee does not cover is stated once, on the spec
// page it belongs to, under a heading "What is not covered", each as a
// list item that opens with an anchor and a bold title:
//
//	- <a id="nc-both-deleted"></a>**Both objects deleted.** ...
//
// Every other page that mentions it links to that anchor
// (protocol.md#nc-both-deleted) instead of stating it again. The check:
// every nc- anchor is defined once, under such a heading; no bold title
// of an exception appears on another page; every link to an nc- anchor
// names one that exists.
//
// Figures. A README paragraph that quotes measured figures names the
// page they come from on the line before it:
//
//	<!-- figures: docs/measurements.md#failover-handover-and-electors-per-process -->
//
// and each decimal figure of the paragraph (a number with a decimal
// point, such as 0.97 or 2.9) must appear in that section of that page,
// so that the README cannot drift from its evidence. A README paragraph
// that gives a median or a multiple of LeaderTimeout without such a line
// is reported too.

var (
	ncAnchor    = regexp.MustCompile(`<a id="(nc-[a-z0-9-]+)"></a>\*\*([^*]+)\*\*`)
	ncLink      = regexp.MustCompile(`\]\(([^)#\s]*)#(nc-[a-z0-9-]+)\)`)
	figuresLine = regexp.MustCompile(`^<!--\s*figures:\s*(\S+?)#(\S+)\s*-->$`)
	decimal     = regexp.MustCompile(`\b\d+\.\d+\b`)
	// measured marks a paragraph that quotes a measurement.
	measured = regexp.MustCompile("(?i)at the median|× `LeaderTimeout`|x LeaderTimeout")
)

// exception is one nc- anchor's definition.
type exception struct {
	file, id, title, heading string
	line                     int
}

// exceptions returns the nc- anchors of the pages, with the heading each
// stands under.
func exceptions(pages map[string]string) []exception {
	var out []exception
	for _, name := range sortedKeys(pages) {
		heading := ""
		for i, l := range outsideCode(pages[name], true) {
			if m := headingPattern.FindStringSubmatch(l); m != nil {
				heading = m[1]
			}
			for _, m := range ncAnchor.FindAllStringSubmatch(l, -1) {
				out = append(out, exception{file: name, id: m[1], title: strings.TrimSpace(m[2]), heading: heading, line: i + 1})
			}
		}
	}
	return out
}

// checkExceptions returns what is wrong with the pages' exceptions.
func checkExceptions(pages map[string]string) []string {
	var bad []string
	defined := map[string]exception{}
	for _, e := range exceptions(pages) {
		if prev, ok := defined[e.id]; ok {
			bad = append(bad, fmt.Sprintf("%s:%d: exception %q is stated again (first at %s:%d); state it once and link to it", e.file, e.line, e.id, prev.file, prev.line))
			continue
		}
		defined[e.id] = e
		if !strings.EqualFold(e.heading, "What is not covered") {
			bad = append(bad, fmt.Sprintf("%s:%d: exception %q stands under %q; exceptions go under the page's heading \"What is not covered\"", e.file, e.line, e.id, e.heading))
		}
	}
	for _, name := range sortedKeys(pages) {
		lines := outsideCode(pages[name], false)
		for i, l := range lines {
			for _, e := range defined {
				if e.file != name && strings.Contains(l, "**"+e.title+"**") {
					bad = append(bad, fmt.Sprintf("%s:%d: the exception %q (%s#%s) is stated here again; link to it instead", name, i+1, e.title, e.file, e.id))
				}
			}
			for _, m := range ncLink.FindAllStringSubmatch(l, -1) {
				target := name
				if m[1] != "" {
					target = path.Clean(path.Join(path.Dir(name), m[1]))
				}
				e, ok := defined[m[2]]
				if !ok || e.file != target {
					bad = append(bad, fmt.Sprintf("%s:%d: the link to exception %s#%s names no exception stated there", name, i+1, m[1], m[2]))
				}
			}
		}
	}
	return bad
}

// section returns the text under the heading whose anchor is frag, up to
// the next heading of the same or a higher level.
func section(text, frag string) (string, bool) {
	lines := outsideCode(text, false)
	for i, l := range lines {
		m := headingPattern.FindStringSubmatch(l)
		if m == nil || anchor(m[1]) != frag {
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, next := range lines[i+1:] {
			if headingPattern.MatchString(next) && len(next)-len(strings.TrimLeft(next, "#")) <= level {
				break
			}
			b.WriteString(next)
			b.WriteByte('\n')
		}
		return b.String(), true
	}
	return "", false
}

// checkFigures returns what is wrong with the figures of readme, whose
// sources are read with read (a path from the repository root).
func checkFigures(readme string, read func(string) (string, error)) []string {
	var bad []string
	lines := outsideCode(readme, true)
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" {
			continue
		}
		start := i
		var para []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			para = append(para, lines[i])
		}
		var src, frag string
		if m := figuresLine.FindStringSubmatch(strings.TrimSpace(para[0])); m != nil {
			src, frag = m[1], m[2]
			para = para[1:]
		}
		text := strings.Join(para, "\n")
		if src == "" {
			if measured.MatchString(text) {
				bad = append(bad, fmt.Sprintf("README.md:%d: this paragraph quotes a measurement but names no source; put <!-- figures: docs/PAGE.md#section --> on the line before it", start+1))
			}
			continue
		}
		page, err := read(src)
		if err != nil {
			bad = append(bad, fmt.Sprintf("README.md:%d: its figures' page %s: %v", start+1, src, err))
			continue
		}
		sec, ok := section(page, frag)
		if !ok {
			bad = append(bad, fmt.Sprintf("README.md:%d: %s has no heading with the anchor #%s", start+1, src, frag))
			continue
		}
		for _, f := range decimal.FindAllString(text, -1) {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(f) + `\b`).MatchString(sec) {
				bad = append(bad, fmt.Sprintf("README.md:%d: the figure %s is not in %s#%s, the page it names; measure again and update both, or fix the source", start+1, f, src, frag))
			}
		}
	}
	return bad
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func readPages(t *testing.T) map[string]string {
	t.Helper()
	pages := map[string]string{}
	for _, name := range markdownFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		pages[name] = string(b)
	}
	return pages
}

func TestExceptionsAreStatedOnce(t *testing.T) {
	pages := readPages(t)
	for _, msg := range checkExceptions(pages) {
		t.Error(msg)
	}
	if n := len(exceptions(pages)); n == 0 {
		t.Fatal("found no exception (<a id=\"nc-...\"></a>**Title.**) under a \"What is not covered\" heading; protocol.md states its exceptions so")
	} else {
		t.Logf("%d exceptions, each stated once", n)
	}
}

func TestREADMEFiguresMatchTheirPages(t *testing.T) {
	pages := readPages(t)
	read := func(p string) (string, error) {
		if s, ok := pages[p]; ok {
			return s, nil
		}
		return "", fmt.Errorf("not among README.md and docs/*.md")
	}
	for _, msg := range checkFigures(pages["README.md"], read) {
		t.Error(msg)
	}
}

// The checks themselves, on made-up pages.
func TestClaimCheckersCatchDrift(t *testing.T) {
	spec := "# Spec\n\n## What is not covered\n\n- <a id=\"nc-a\"></a>**Both gone.** Terms repeat.\n"
	pages := map[string]string{
		"docs/spec.md": spec,
		"README.md":    "See [both gone](docs/spec.md#nc-a) and [nothing](docs/spec.md#nc-b).\n\n**Both gone.** restated\n",
		"docs/zother.md": "## Elsewhere\n\n- <a id=\"nc-c\"></a>**Misplaced.** here\n" +
			"- <a id=\"nc-a\"></a>**Again.** twice\n",
	}
	got := strings.Join(checkExceptions(pages), "\n")
	for _, want := range []string{"stated again (first at", "stands under \"Elsewhere\"", "is stated here again", "names no exception stated there"} {
		if !strings.Contains(got, want) {
			t.Errorf("checkExceptions() = %q; want a line with %q", got, want)
		}
	}
	if bad := checkExceptions(map[string]string{"docs/spec.md": spec, "README.md": "[b](docs/spec.md#nc-a)\n"}); len(bad) != 0 {
		t.Errorf("checkExceptions(clean pages) = %q; want nothing", bad)
	}

	page := "# M\n\n## Failover\n\nmedian 0.97, heap 2.9 KiB\n\n## Other\n\n1.5\n"
	read := func(string) (string, error) { return page, nil }
	readme := "<!-- figures: docs/m.md#failover -->\nled again 0.97 × `LeaderTimeout` at the median, 2.9 KiB, 1.5 goroutines\n\n" +
		"Failover at 1.2 × `LeaderTimeout` at the median.\n"
	got = strings.Join(checkFigures(readme, read), "\n")
	for _, want := range []string{"the figure 1.5 is not in", "names no source"} {
		if !strings.Contains(got, want) {
			t.Errorf("checkFigures() = %q; want a line with %q", got, want)
		}
	}
	if strings.Contains(got, "0.97") || strings.Contains(got, "2.9 ") {
		t.Errorf("checkFigures() = %q; reported a figure its page has", got)
	}
}
