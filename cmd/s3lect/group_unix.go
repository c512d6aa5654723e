//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// group is the command's process group. Its leader is a guard: this binary
// re-executed, which starts the command in its group, passes on the
// command's exit status, and kills the whole group, itself included, if
// the runner dies (see guard). The runner signals the group, never a
// single process, so the command's own children get every signal too.
type group struct {
	pgid   int
	exited chan struct{} // closed once the guard has exited and been reaped
	status int           // the guard's exit status (the command's), set before exited closes
}

// startGroup starts command under a guard in a new process group, env
// its environment.
func startGroup(command []string, env []string) (*group, error) {
	w, err := prestartGroup(command, nil)
	if err != nil {
		return nil, err
	}
	return w.start(env)
}

// warmGuard is a guard started before it is needed: its process group
// exists, this binary has started (tens to hundreds of milliseconds on a
// loaded machine, on the path from winning a leadership to the
// command's start), and it waits on a pipe for the word to start the
// command.
type warmGuard struct {
	g    *group
	word *os.File // the pipe's write end: "go\n" and the extra environment, or closed unsaid to discard it
}

// prestartGroup starts a guard for command, in a process group of its
// own, that starts the command only when start is called; env is the
// guard's environment (nil: this process's).
func prestartGroup(command []string, env []string) (*warmGuard, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start the guard: %w", err)
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the guard: %w", err)
	}
	args := append([]string{guardArg, strconv.Itoa(os.Getpid()), "--"}, command...)
	cmd := exec.Command(self, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{rd} // fd 3: the word to start
	cmd.SysProcAttr = guardAttr()
	g := &group{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// On Linux the guard's parent-death signal fires when the thread
		// that started it exits, not the process, and Go retires threads
		// at will. Locked here and never unlocked, this thread lives until
		// the guard has been reaped; then the goroutine's end retires it.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		g.pgid = cmd.Process.Pid
		started <- nil
		g.status = exitCode(cmd.Wait())
		close(g.exited)
	}()
	err = <-started
	rd.Close() // the guard has its own copy
	if err != nil {
		wr.Close()
		return nil, err
	}
	return &warmGuard{g: g, word: wr}, nil
}

// start tells the guard to start its command, with extra added to its
// environment, and returns the group.
func (w *warmGuard) start(extra []string) (*group, error) {
	var b strings.Builder
	b.WriteString("go\n")
	for _, kv := range extra {
		if strings.IndexByte(kv, 0) >= 0 {
			w.discard()
			return nil, fmt.Errorf("environment entry %q holds a NUL byte", kv)
		}
		b.WriteString(kv)
		b.WriteByte(0)
	}
	_, err := io.WriteString(w.word, b.String())
	if cerr := w.word.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		w.g.kill()
		return nil, fmt.Errorf("start the command's guard: %w", err)
	}
	return w.g, nil
}

// discard ends a guard that was not needed, without starting its command,
// and waits for it to exit.
func (w *warmGuard) discard() {
	w.word.Close() // the guard reads no word: it exits
	<-w.g.exited
}

// signal sends sig to every process of the group.
func (g *group) signal(sig syscall.Signal) {
	syscall.Kill(-g.pgid, sig)
}

// kill sends SIGKILL to the group and returns once no process of it runs
// any more. It reports how long that took after the signal, and an error
// if a process survived for a whole second (stuck in the kernel).
func (g *group) kill() (time.Duration, error) {
	start := time.Now()
	g.signal(syscall.SIGKILL)
	<-g.exited
	for !groupGone(g.pgid) {
		if time.Since(start) > time.Second {
			return time.Since(start), fmt.Errorf("process group %d still has live processes 1s after SIGKILL", g.pgid)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start), nil
}

// guard is the process that leads the command's group. args: the runner's
// PID, "--", the command. It exits with the command's status. If its
// parent, the runner, dies first (even by SIGKILL), it kills the group,
// itself with it: on Linux it learns of the death from its parent-death
// signal (SIGUSR1, set by the runner at fork); everywhere it also checks
// every 50ms that its parent is still the runner.
func guard(args []string, stderr io.Writer) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(stderr, "s3lect: the guard is internal to s3lect run; do not call it directly")
		return exitUsage
	}
	runner, _ := strconv.Atoi(args[0])
	command := args[2:]
	death := make(chan os.Signal, 1)
	signal.Notify(death, syscall.SIGUSR1)
	// Wait for the word to start (prestartGroup): "go" and the extra
	// environment, NUL-separated, on fd 3, closed after it. A pipe closed
	// without it (the runner did not need this guard, or died) ends the
	// guard here, nothing started.
	word := os.NewFile(3, "guard-go")
	said, err := io.ReadAll(word)
	word.Close()
	extra, ok := strings.CutPrefix(string(said), "go\n")
	if err != nil || !ok {
		return exitOK
	}
	// The runner signals the whole group, so the command gets SIGTERM and
	// SIGINT directly; the guard must outlive it to pass its status on. A
	// handled signal (unlike an ignored one) is reset for the command at
	// exec.
	quiet := make(chan os.Signal, 1)
	signal.Notify(quiet, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	killAll := func() { syscall.Kill(0, syscall.SIGKILL) }
	if os.Getppid() != runner {
		killAll() // the runner died before we got here
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	if extra = strings.TrimSuffix(extra, "\x00"); extra != "" {
		cmd.Env = append(cmd.Env, strings.Split(extra, "\x00")...) // the last of a key wins
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "s3lect: start %s: %v\n", command[0], err)
		return exitNotStart
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case err := <-exited:
			return exitCode(err)
		case <-death:
			killAll()
		case <-poll.C:
			if os.Getppid() != runner {
				killAll()
			}
		case <-quiet:
		}
	}
}

// exitCode turns a process's end into a shell-style status: its exit code,
// or 128+N when signal N killed it.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		return exitFailure
	}
}

// forwarded lists the signals run passes on to its command on a voluntary
// stop.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT}

// sigNumber returns sig as a syscall.Signal (SIGTERM for anything else).
func sigNumber(sig os.Signal) syscall.Signal {
	if s, ok := sig.(syscall.Signal); ok {
		return s
	}
	return syscall.SIGTERM
}

// runSupported is nil: run works on Unix.
var runSupported error
