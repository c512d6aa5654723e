package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/s3lect/s3lect/fence"
	"github.com/s3lect/s3lect/store"
)

// Exit statuses of the fenced subcommands (put, get, delete, seal).
const (
	exitFenced  = 7 // a newer leader has written or sealed the key: stop
	exitAbsent  = 8 // get: no such key, or deleted
	exitUnknown = 9 // the write may or may not have landed (its reply was lost)
)

// The environment `s3lect run` gives its command, read by the fenced
// subcommands: the term, and where the lockfile is (the fenced objects
// live in the same bucket).
const (
	envTerm      = "S3LECT_TERM"
	envStore     = "S3LECT_STORE"
	envEndpoint  = "S3LECT_S3_ENDPOINT"
	envPathStyle = "S3LECT_S3_PATH_STYLE"
)

// childEnv is what run adds to its command's environment. S3LECT_STORE is
// the store as run was given it, credentials of a nats:// URL included:
// the command must reach the store run elects on, and its environment is
// no more exposed than run's own command line.
func childEnv(o runConfig, term uint64) []string {
	url := o.sf.url
	if url == "" {
		url = "s3://" + o.sf.bucket + "/" + o.sf.key
	}
	env := []string{fmt.Sprintf("%s=%d", envTerm, term), envStore + "=" + url}
	if o.sf.endpoint != "" {
		env = append(env, envEndpoint+"="+o.sf.endpoint)
	}
	if o.sf.pathStyle {
		env = append(env, envPathStyle+"=1")
	}
	// The command's `s3lect put` finds this binary even where it is not
	// on PATH (run from a build directory, a container's /app): its
	// directory goes last, so an s3lect already on PATH still wins.
	if exe, err := os.Executable(); err == nil {
		env = append(env, "PATH="+withDir(os.Getenv("PATH"), filepath.Dir(exe)))
	}
	return env
}

// withDir returns the PATH list path with dir appended, unless it is
// already in it.
func withDir(path, dir string) string {
	if path == "" {
		return dir
	}
	if slices.Contains(filepath.SplitList(path), dir) {
		return path
	}
	return path + string(filepath.ListSeparator) + dir
}

const fenceUsage = `usage: s3lect put    [flags] KEY [FILE|-]   write FILE (stdin if none or -) at KEY, fenced by the term
       s3lect get    [flags] KEY            print KEY's data; its term goes to stderr
       s3lect delete [flags] KEY            delete KEY, fenced (leaves a tombstone with the term)
       s3lect seal   [flags] KEY...         raise each KEY to the term, so no older leader writes it

Reads and writes objects through the fence (docs/fencing.md): once a write of
term t has landed on KEY, no write of a lower term lands there. Run by the
command of 's3lect run', they need no flags: the term comes from S3LECT_TERM and
the store from S3LECT_STORE (the lockfile's URL); KEY is a key in the same
bucket, other than the lockfile and its term object (<lockfile>.term), which
are refused. Each object is one header line, then the data ('sed 1d' strips
it).

Exit statuses: 0 done, 1 unexpected failure (nothing written), 2 bad usage,
5 the store refused for good, 7 fenced (a newer leader wrote or sealed the key:
stop), 8 get: no such key (or deleted), 9 the outcome is unknown (the write's
reply was lost: it may have landed, with the term).

Flags:
`

// fenceConfig is the command line of put, get, delete or seal, parsed.
type fenceConfig struct {
	name string // put, get, delete or seal
	sf   storeFlags
	term uint64   // the writer's term (0 for get)
	keys []string // the keys named (put: the key, then its file, if any)
	data []byte   // put: what to write
}

func fenceCmd(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, code, ok := parseFence(name, args, stdin, stderr, os.Getenv)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return fenceRun(ctx, c, stdout, stderr)
}

// parseFence parses the flags and arguments of the fenced subcommand
// name, taking the store and the term from run's environment (getenv)
// where the flags do not give them, and put's data from its file or
// stdin. It reports false, with the exit status, when it must not run.
func parseFence(name string, args []string, stdin io.Reader, stderr io.Writer, getenv func(string) string) (fenceConfig, int, bool) {
	c := fenceConfig{name: name}
	var termArg string
	who := "s3lect " + name
	fs := flag.NewFlagSet(who, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), fenceUsage)
		fs.PrintDefaults()
	}
	c.sf.register(fs)
	fs.StringVar(&termArg, "term", "", "the writer's term, a decimal number (default: $"+envTerm+", set by 's3lect run')")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, exitOK, false
		}
		return c, exitUsage, false
	}
	c.keys = fs.Args()
	if err := c.check(termArg, getenv); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return c, exitUsage, false
	}
	if name == "put" {
		var err error
		if c.data, err = readInput(c.keys[1:], stdin); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", who, err)
			return c, exitUsage, false
		}
	}
	return c, exitOK, true
}

// check fills the store and the term from the environment where the
// flags leave them out, and says what is wrong with the arguments.
func (c *fenceConfig) check(termArg string, getenv func(string) string) error {
	who := "s3lect " + c.name
	switch {
	case len(c.keys) == 0:
		return fmt.Errorf("no key named; usage: %s KEY%s", who, map[string]string{"put": " [FILE|-]", "seal": "..."}[c.name])
	case c.name == "put" && len(c.keys) > 2, (c.name == "get" || c.name == "delete") && len(c.keys) > 1:
		return fmt.Errorf("unexpected argument %q", c.keys[len(c.keys)-1])
	}
	if c.sf.url == "" && c.sf.bucket == "" && c.sf.key == "" {
		c.sf.url = getenv(envStore)
		if c.sf.endpoint == "" {
			c.sf.endpoint = getenv(envEndpoint)
		}
		c.sf.pathStyle = c.sf.pathStyle || getenv(envPathStyle) == "1"
	}
	if c.sf.url == "" && c.sf.bucket == "" {
		return fmt.Errorf("no store named: run it as the command of 's3lect run' (which sets %s), or give -store with the lockfile's URL", envStore)
	}
	if c.name == "get" {
		return nil
	}
	raw, from := termArg, "-term"
	if raw == "" {
		raw, from = getenv(envTerm), envTerm
	}
	t, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || t == 0 {
		return fmt.Errorf("no term: %s %q is not a positive decimal number; run it as the command of 's3lect run' (which sets %s) or give -term", from, raw, envTerm)
	}
	c.term = t
	return nil
}

// fenceRun opens the store and reads or writes through the fence.
func fenceRun(ctx context.Context, c fenceConfig, stdout, stderr io.Writer) int {
	who := "s3lect " + c.name
	st, err := c.sf.open(ctx, stderr)
	if err != nil {
		return reportErr(stderr, who, err)
	}
	defer st.close()
	named := c.keys
	if c.name == "put" {
		named = c.keys[:1] // the second argument is the file
	}
	for _, k := range named {
		if k == st.key || k == st.key+".term" {
			fmt.Fprintf(stderr, "%s: %q is an object of the election on %s (the lockfile or its term object); fence objects of your own, never those\n", who, k, st.where)
			return exitUsage
		}
	}
	if c.name == "get" {
		return fenceGet(ctx, st, c.keys[0], stdout, stderr)
	}
	w, err := fence.New(st.st, c.term)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitUsage
	}
	switch c.name {
	case "put":
		err = w.Put(ctx, c.keys[0], c.data)
	case "delete":
		err = w.Delete(ctx, c.keys[0])
	default:
		err = w.Seal(ctx, c.keys...)
	}
	return reportFenceErr(stderr, who, err)
}

// fenceGet prints key's data, and its term to stderr.
func fenceGet(ctx context.Context, st *opened, key string, stdout, stderr io.Writer) int {
	got, t, err := fence.Read(ctx, st.st, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintf(stderr, "s3lect get: %v\n", err)
		return exitAbsent
	case err != nil:
		return reportFenceErr(stderr, "s3lect get", err)
	}
	fmt.Fprintf(stderr, "s3lect get: %q: term %d\n", key, t)
	if _, err := stdout.Write(got); err != nil {
		fmt.Fprintf(stderr, "s3lect get: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// readInput reads the data of put: the file named, or stdin for "-" or
// no argument.
func readInput(args []string, stdin io.Reader) ([]byte, error) {
	if len(args) == 0 || args[0] == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(args[0])
}

func reportFenceErr(stderr io.Writer, who string, err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, fence.ErrFenced):
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitFenced
	case errors.Is(err, fence.ErrOutcomeUnknown):
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitUnknown
	case errors.Is(err, fence.ErrTooLarge):
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitUsage
	}
	return reportErr(stderr, who, err)
}
