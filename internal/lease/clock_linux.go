package lease

import (
	"syscall"
	"time"
	"unsafe"
)

// Linux's clock IDs (linux/time.h).
const (
	clockMonotonic = 1
	clockBoottime  = 7
)

// hostSlept returns how long the host has been suspended since boot:
// CLOCK_BOOTTIME less CLOCK_MONOTONIC (clock_gettime(2)), read between two
// readings of the monotonic clock that are at most 50 µs apart (a thread
// descheduled between two reads would otherwise add its wait); false if
// the clocks cannot be read so.
func hostSlept() (time.Duration, bool) {
	for range 4 {
		var m1, boot, m2 syscall.Timespec
		if clockGettime(clockMonotonic, &m1) != nil || clockGettime(clockBoottime, &boot) != nil ||
			clockGettime(clockMonotonic, &m2) != nil {
			return 0, false
		}
		if gap := m2.Nano() - m1.Nano(); gap >= 0 && gap <= int64(50*time.Microsecond) {
			return max(time.Duration(boot.Nano()-m1.Nano()-gap/2), 0), true
		}
	}
	return 0, false
}

func clockGettime(id int, ts *syscall.Timespec) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, uintptr(id), uintptr(unsafe.Pointer(ts)), 0); e != 0 {
		return e
	}
	return nil
}
