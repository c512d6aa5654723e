package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// guardAttr puts the guard in a process group of its own and asks the
// kernel to send it SIGUSR1 when the runner's starting thread (see
// startGroup) ends, which includes the runner's death by any signal.
func guardAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR1}
}

// groupGone reports whether no process of group pgid is still running. A
// zombie (dead, not yet reaped by its parent, which may be an init that
// never reaps) runs nothing and does not count.
func groupGone(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if pg, _ := strconv.Atoi(string(f[2])); pg == pgid {
			return false
		}
	}
	return true
}
