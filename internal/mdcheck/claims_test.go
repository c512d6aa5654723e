package mdcheck

import (
	"fmt"
	"os"

	"path/filepath"
	"regexp"

	"strings"
	"testing"
)

// The README's figures match their evidence.
//
// Figures. A README paragraph that quotes measured figures names the
// pages they come from on the line before it (one or more, each a page
// or a page's section):
//
//	<!-- figures: docs/measurements.md#failover-handover-and-electors-per-process -->
//
// and each decimal figure of the paragraph (a number with a decimal
// point, such as 0.97 or 2.9) must appear in that section of that page,
// so that the README cannot drift from its evidence. A README paragraph
// that gives a median or a multiple of LeaderTimeout without such a line
// is reported too.

var (
	figuresLine = regexp.MustCompile(`^<!--\s*figures:\s*(.+?)\s*-->$`)
	decimal     = regexp.MustCompile(`\b\d+\.\d+\b`)
	// measured marks a paragraph that quotes a measurement.
	measured = regexp.MustCompile("(?i)at the median|× `LeaderTimeout`|x LeaderTimeout")
)

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
		var srcs []string
		if m := figuresLine.FindStringSubmatch(strings.TrimSpace(para[0])); m != nil {
			srcs = strings.Fields(m[1])
			para = para[1:]
		}
		text := strings.Join(para, "\n")
		if len(srcs) == 0 {
			if measured.MatchString(text) {
				bad = append(bad, fmt.Sprintf("README.md:%d: this paragraph quotes a measurement but names no source; put <!-- figures: docs/PAGE.md#section --> on the line before it", start+1))
			}
			continue
		}
		var secs []string
		for _, src := range srcs {
			file, frag, _ := strings.Cut(src, "#")
			page, err := read(file)
			if err != nil {
				bad = append(bad, fmt.Sprintf("README.md:%d: its figures' page %s: %v", start+1, file, err))
				continue
			}
			sec, ok := page, true
			if frag != "" {
				sec, ok = section(page, frag)
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("README.md:%d: %s has no heading with the anchor #%s", start+1, file, frag))
				continue
			}
			secs = append(secs, sec)
		}
		for _, f := range decimal.FindAllString(text, -1) {
			re := regexp.MustCompile(`\b` + regexp.QuoteMeta(f) + `\b`)
			found := false
			for _, sec := range secs {
				found = found || re.MatchString(sec)
			}
			if !found {
				bad = append(bad, fmt.Sprintf("README.md:%d: the figure %s is in none of the pages it names (%s); measure again and update both, or fix the source", start+1, f, strings.Join(srcs, " ")))
			}
		}
	}
	return bad
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

// The check itself, on made-up pages.
func TestFigureCheckerCatchesDrift(t *testing.T) {
	var got string
	page := "# M\n\n## Failover\n\nmedian 0.97, heap 2.9 KiB\n\n## Other\n\n1.5\n"
	read := func(string) (string, error) { return page, nil }
	readme := "<!-- figures: docs/m.md#failover -->\nled again 0.97 × `LeaderTimeout` at the median, 2.9 KiB, 1.5 goroutines\n\n" +
		"Failover at 1.2 × `LeaderTimeout` at the median.\n"
	got = strings.Join(checkFigures(readme, read), "\n")
	for _, want := range []string{"the figure 1.5 is in none of the pages", "names no source"} {
		if !strings.Contains(got, want) {
			t.Errorf("checkFigures() = %q; want a line with %q", got, want)
		}
	}
	if strings.Contains(got, "0.97") || strings.Contains(got, "2.9 ") {
		t.Errorf("checkFigures() = %q; reported a figure its page has", got)
	}
}
