//go:build unix && !linux

package main

import "syscall"

// guardAttr puts the guard in a process group of its own. These systems
// have no parent-death signal: the guard notices the runner's death by
// polling its parent PID (every 50ms), then kills the group.
func guardAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupGone reports whether group pgid has no process left. Zombies still
// count here, so the runner may wait until their parent reaps them.
func groupGone(pgid int) bool {
	return syscall.Kill(-pgid, 0) == syscall.ESRCH
}
