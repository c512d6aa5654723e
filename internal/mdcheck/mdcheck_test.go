package mdcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// block is one ```go block of a Markdown file.
type block struct {
	file   string // the Markdown file, relative to root
	line   int    // the line of its opening fence, from 1
	source string // the file its snippet line names, "" if none
	lines  []string
}

var snippetLine = regexp.MustCompile(`^\s*<!--\s*snippet:\s*(\S+)\s*-->\s*$`)

// goBlocks returns the ```go blocks of a Markdown text. A fence may be
// indented (a block inside a list item); its lines lose that indentation.
func goBlocks(name, text string) ([]block, error) {
	var (
		out    []block
		cur    *block
		indent string
		prev   string
	)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " \t")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```go") && strings.TrimSpace(trimmed[len("```go"):]) == "":
			cur = &block{file: name, line: i + 1}
			indent = l[:len(l)-len(trimmed)]
			if m := snippetLine.FindStringSubmatch(prev); m != nil {
				cur.source = m[1]
			}
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			// another language: skip to its closing fence
			for j := i + 1; j < len(lines); j++ {
				if strings.HasPrefix(strings.TrimLeft(lines[j], " \t"), "```") {
					lines[j] = "" // not an opening fence
					break
				}
			}
		case cur != nil && strings.HasPrefix(trimmed, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, strings.TrimPrefix(l, indent))
		}
		prev = l
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the ```go block is never closed", name, cur.line)
	}
	return out, nil
}

// contains reports whether file holds lines as consecutive lines, each
// non-blank one with the same indentation added.
func contains(file, lines []string) bool {
	if len(lines) == 0 {
		return false
	}
	for start := 0; start+len(lines) <= len(file); start++ {
		first := file[start]
		if !strings.HasSuffix(first, lines[0]) {
			continue
		}
		indent := first[:len(first)-len(lines[0])]
		if strings.Trim(indent, "\t ") != "" {
			continue
		}
		ok := true
		for i, l := range lines {
			got := file[start+i]
			if l == "" && strings.TrimSpace(got) == "" {
				continue
			}
			if got != indent+l {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

func TestMarkdownGoBlocksAreCompiled(t *testing.T) {
	checked := 0
	for _, name := range markdownFiles(t) {
		text, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := goBlocks(name, string(text))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range blocks {
			checked++
			if err := check(b); err != nil {
				t.Error(err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no ```go block in README.md and docs/*.md; the README shows at least one")
	}
	t.Logf("%d Go blocks checked", checked)
}

// check says what is wrong with one block, or returns nil.
func check(b block) error {
	where := fmt.Sprintf("%s:%d", b.file, b.line)
	if b.source == "" {
		return fmt.Errorf("%s: this ```go block names no Go file it is copied from; put a line <!-- snippet: path/to/example_test.go --> right before it (a path from the repository root), and the code in that file, compiled", where)
	}
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.source)))
	if err != nil {
		return fmt.Errorf("%s: its snippet file %s: %v", where, b.source, err)
	}
	if !strings.HasSuffix(b.source, ".go") {
		return fmt.Errorf("%s: its snippet file %s is not a Go file", where, b.source)
	}
	lines := b.lines
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if !contains(strings.Split(string(src), "\n"), lines) {
		return fmt.Errorf("%s: the ```go block (%d lines, starting %q) is not in %s as it stands there; copy the lines from the Go file (which the build compiles), or change the file first", where, len(lines), first(lines), b.source)
	}
	return nil
}

func first(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// The checker itself: a block that differs by one character, or names no
// file, is reported; blocks of other languages are ignored.
func TestCheckerCatchesDrift(t *testing.T) {
	file := strings.Split("package x\n\nfunc f() {\n\tfor {\n\t\tg(1)\n\t}\n}\n", "\n")
	cases := []struct {
		name  string
		lines []string
		want  bool
	}{
		{"exact, indentation removed", []string{"for {", "\tg(1)", "}"}, true},
		{"one character off", []string{"for {", "\tg(2)", "}"}, false},
		{"indentation off", []string{"for {", "g(1)", "}"}, false},
		{"lines out of order", []string{"\tg(1)", "for {"}, false},
		{"empty", nil, false},
	}
	for _, tc := range cases {
		if got := contains(file, tc.lines); got != tc.want {
			t.Errorf("%s: contains() = %v; want %v", tc.name, got, tc.want)
		}
	}
	md := "text\n<!-- snippet: a.go -->\n```go\nx := 1\n```\n```json\n{\"a\":1}\n```\n  ```go\n  y := 2\n  ```\n"
	blocks, err := goBlocks("t.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].source != "a.go" || blocks[0].line != 3 || strings.Join(blocks[0].lines, "\n") != "x := 1" ||
		blocks[1].source != "" || strings.Join(blocks[1].lines, "\n") != "y := 2" {
		t.Errorf("goBlocks() = %+v; want the two go blocks, the first naming a.go", blocks)
	}
	if err := check(blocks[1]); err == nil || !strings.Contains(err.Error(), "snippet") {
		t.Errorf("check(block without a snippet line) = %v; want an error saying to add one", err)
	}
}
