//go:build !unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// On systems without Unix process groups, run refuses to start: it could
// not keep its promise that the command dies with the runner.

type group struct {
	exited chan struct{}
	status int
}

var errNoGroups = errors.New("s3lect run needs Unix process groups (Linux, macOS, the BSDs); status and watch work here")

func startGroup([]string, []string) (*group, error) { return nil, errNoGroups }

type warmGuard struct{}

func prestartGroup([]string, []string) (*warmGuard, error) { return nil, errNoGroups }
func (*warmGuard) start([]string) (*group, error)          { return nil, errNoGroups }
func (*warmGuard) discard()                                {}
func (g *group) signal(syscall.Signal)                     {}
func (g *group) kill() (time.Duration, error)              { return 0, errNoGroups }

func guard(_ []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "s3lect:", errNoGroups)
	return exitUsage
}

var forwarded = []os.Signal{os.Interrupt}

func sigNumber(os.Signal) syscall.Signal { return syscall.SIGTERM }

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	return exitFailure
}

// runSupported is why run cannot work here.
var runSupported = errNoGroups
