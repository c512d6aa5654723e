package mdcheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// Every relative link of README.md and docs/*.md names a file that exists,
// and a #fragment names a heading of the page it points into (as GitHub
// makes anchors of headings). Links into other sites are not fetched.

var (
	linkPattern    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingPattern = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	inlineCode     = regexp.MustCompile("`[^`]*`")
)

// anchor is GitHub's anchor for a heading: lower case, punctuation dropped
// but for hyphens and underscores, spaces made hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// outsideCode returns the lines of a Markdown text that are not in fenced
// blocks (others are empty), with inline code removed if inline is set.
func outsideCode(text string, inline bool) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "```") {
			fenced = !fenced
			out = append(out, "")
			continue
		}
		if fenced {
			out = append(out, "")
			continue
		}
		if inline {
			l = inlineCode.ReplaceAllString(l, "")
		}
		out = append(out, l)
	}
	return out
}

// htmlAnchor is an explicit anchor, <a id="..."></a> (the exceptions of
// exceptions_test.go).
var htmlAnchor = regexp.MustCompile(`<a id="([^"]+)"></a>`)

// anchors returns the anchors of a Markdown text's headings, a repeated
// heading getting -1, -2, ... as on GitHub, and its explicit anchors.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range outsideCode(text, false) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := headingPattern.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// brokenLinks returns what is wrong with the relative links of the
// Markdown file name (relative to root, slash-separated), whose text is
// text; read reads another file of the repository, by the same kind of
// name.
func brokenLinks(name, text string, read func(string) (string, error)) []string {
	var problems []string
	for i, l := range outsideCode(text, true) {
		for _, m := range linkPattern.FindAllStringSubmatch(l, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := name
			if file != "" {
				dest = path.Clean(path.Join(path.Dir(name), file))
			}
			where := fmt.Sprintf("%s:%d: link %s", name, i+1, target)
			destText, err := read(dest)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s does not exist; fix the path (relative to %s)", where, dest, path.Dir(name)))
				continue
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchors(destText)[frag] {
				problems = append(problems, fmt.Sprintf("%s: %s has no heading whose anchor is #%s; link to one of its headings (lower case, punctuation dropped, spaces made hyphens)", where, dest, frag))
			}
		}
	}
	return problems
}

func TestMarkdownLinksResolve(t *testing.T) {
	read := func(name string) (string, error) {
		info, err := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return "", err
		}
		if info.IsDir() {
			return "", nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		return string(b), err
	}
	links := 0
	for _, name := range markdownFiles(t) {
		text, err := read(name)
		if err != nil {
			t.Fatal(err)
		}
		links += len(linkPattern.FindAllString(strings.Join(outsideCode(text, true), "\n"), -1))
		for _, p := range brokenLinks(name, text, read) {
			t.Error(p)
		}
	}
	if links == 0 {
		t.Fatal("found no link in README.md and docs/*.md; the README links the docs")
	}
	t.Logf("%d links checked", links)
}

// The checker itself: a missing file and a missing anchor are reported,
// links to other sites and inside code are not.
func TestLinkCheckerCatchesBreaks(t *testing.T) {
	files := map[string]string{
		"docs/a.md": "# Page A\n\n## 4.1 When a takeover is allowed\n\n## Notes\n\n## Notes\n\n## `release`: step down\n",
	}
	read := func(name string) (string, error) {
		if s, ok := files[name]; ok {
			return s, nil
		}
		return "", os.ErrNotExist
	}
	cases := []struct {
		text   string
		broken bool
	}{
		{"see [a](a.md)", false},
		{"see [a](a.md#41-when-a-takeover-is-allowed)", false},
		{"see [a](a.md#notes-1)", false},
		{"see [a](a.md#release-step-down)", false},
		{"see [a](../docs/a.md#page-a)", false},
		{"see [here](#local)\n\n## Local", false},
		{"see [b](b.md)", true},
		{"see [a](a.md#4.1-when-a-takeover-is-allowed)", true},
		{"see [a](a.md#notes-2)", true},
		{"see [here](#elsewhere)", true},
		{"see [go](https://go.dev/nowhere.md)", false},
		{"`[b](b.md)` is code", false},
		{"```\n[b](b.md)\n```", false},
	}
	for _, c := range cases {
		files["docs/x.md"] = c.text
		got := brokenLinks("docs/x.md", c.text, read)
		if (len(got) > 0) != c.broken {
			t.Errorf("links of %q: problems %q; want broken = %v", c.text, got, c.broken)
		}
	}
	if a := anchor("11. Operator step-down"); a != "11-operator-step-down" {
		t.Errorf("anchor = %q; want 11-operator-step-down", a)
	}
}
