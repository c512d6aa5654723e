// Package chaos holds the fault-injection tests that prove on real servers
// what the virtual-time simulation proves in the root package: elections
// on a real MinIO through a fault-injecting TCP proxy (latency spikes past
// the lease, bandwidth limits, connections cut mid-reply, replies dropped
// after the write landed, a partitioned leader), real OS processes killed,
// paused past their lease and resumed, and MinIO restarted under load;
// and a pool of shards (package pool) as worker processes, a worker and
// the coordinator killed, the coordinator paused past its lease, and a
// worker joining (TestPoolProcesses).
//
// The tests start their own MinIO from the binary .ci/run installs
// (S3LECT_TEST_MINIO), so that they can restart it. A longer randomized
// soak runs with -chaos.duration=10m.
//
// The fault tests run side by side (t.Parallel; .ci/run gives them
// -parallel 4 or more): each has its own MinIO, lockfile and ledger, and they
// spend their time waiting on real timers (a few percent of a core each
// under -race), so they do not compete for what they check. Faults are
// applied per test, to that test's own proxies, processes and MinIO.
//
// The suite is a module of its own (go.mod beside this file, joined to the
// main module by the repository's go.work), so that toxiproxy and what it
// pulls in (Prometheus, zerolog, gorilla/mux) never enter the module graph
// of a program that imports s3lect. From the repository root:
//
//	go test ./internal/chaos/...
package chaos
