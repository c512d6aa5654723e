// Command modproxy writes a file-based Go module proxy (GOPROXY=file://DIR)
// holding one version of each module of a source tree, for
// .ci/release-rehearsal:
//
//	go run .ci/modproxy.go -version v0.0.1-rehearsal -out DIR -tree SRC dir...
//
// Each dir (relative to SRC, "." for the root) is a module. Its zip holds
// every file under it except those of nested modules (a subdirectory with
// a go.mod of its own) and of version-control directories, as the go
// command's own zips do. The dirs are taken in order, and before a module
// is zipped its go.sum gets the hashes of the earlier modules it requires,
// so that a dependency comes before the modules that need it.
//
// It is standard library only, on purpose: golang.org/x/mod/zip would do
// the zipping, but the rehearsal runs in every CI run, and a tool module
// of its own would be one more module to download and build there for
// about a hundred lines of code.
//
// Run as a file (`go run .ci/modproxy.go`): a directory starting with a
// dot is no package of any module.
package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
)

func main() {
	out := flag.String("out", "", "the proxy directory to write")
	tree := flag.String("tree", ".", "the source tree the module directories are in")
	version := flag.String("version", "", "the version every module gets, e.g. v0.0.1-rehearsal")
	flag.Parse()
	if *out == "" || *version == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: go run .ci/modproxy.go -out DIR -version VERSION [-tree SRC] moduledir...")
		os.Exit(2)
	}
	sums := map[string][2]string{} // module path -> {zip hash, go.mod hash}
	for _, dir := range flag.Args() {
		if err := publish(*out, filepath.Join(*tree, dir), *version, sums); err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", dir, err)
			os.Exit(1)
		}
	}
}

// publish writes one module's version into the proxy at out.
func publish(out, dir, version string, sums map[string][2]string) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	mod := modulePath(gomod)
	if mod == "" {
		return fmt.Errorf("go.mod names no module")
	}
	if err := addSums(dir, gomod, version, sums); err != nil {
		return err
	}
	files, err := moduleFiles(dir)
	if err != nil {
		return err
	}
	esc, err := escape(mod)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	prefix := mod + "@" + version + "/"
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var hashes []string
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		w, err := zw.Create(prefix + rel)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		hashes = append(hashes, fmt.Sprintf("%x  %s\n", sha256.Sum256(data), prefix+rel))
	}
	if err := zw.Close(); err != nil {
		return err
	}
	info, _ := json.Marshal(struct{ Version, Time string }{version, time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{version + ".zip": buf.Bytes(), version + ".mod": gomod, version + ".info": info} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	if err := appendLine(filepath.Join(vdir, "list"), version); err != nil {
		return err
	}
	sums[mod] = [2]string{hash1(hashes), hash1([]string{fmt.Sprintf("%x  %s\n", sha256.Sum256(gomod), "go.mod")})}
	fmt.Printf("%s %s: %d files, %d bytes\n", mod, version, len(files), buf.Len())
	return nil
}

// addSums appends to dir's go.sum the hashes of the modules already
// published that its go.mod requires at version.
func addSums(dir string, gomod []byte, version string, sums map[string][2]string) error {
	var lines []string
	for _, l := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require "))
		if len(f) < 2 || f[1] != version {
			continue
		}
		if h, ok := sums[f[0]]; ok {
			lines = append(lines, fmt.Sprintf("%s %s %s\n%s %s/go.mod %s\n", f[0], version, h[0], f[0], version, h[1]))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "go.sum"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if _, err := f.WriteString(l); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// hash1 is the go.sum "h1:" hash of files given as "sha256hex  name\n"
// lines: the SHA-256 of the lines sorted by name.
func hash1(lines []string) string {
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
	}
	return "h1:" + base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// moduleFiles lists the files of the module at dir, as slash paths
// relative to it, sorted.
func moduleFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			switch d.Name() {
			case ".git", ".hg", ".svn", ".bzr", "vendor":
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module: not part of this one
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file; module zips hold regular files only", rel)
		}
		files = append(files, rel)
		return nil
	})
	sort.Strings(files)
	return files, err
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// escape is the proxy protocol's case encoding of a module path: each
// upper-case letter becomes '!' and its lower case.
func escape(p string) (string, error) {
	var b strings.Builder
	for _, r := range p {
		switch {
		case r == '!' || r >= unicode.MaxASCII:
			return "", fmt.Errorf("module path %q: unexpected character %q", p, r)
		case unicode.IsUpper(r):
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return path.Clean(b.String()), nil
}

func appendLine(name, line string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
