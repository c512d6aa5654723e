// Command k8smanager is a controller-runtime manager whose leader is
// elected on S3 with package k8slock instead of a Lease in its cluster,
// so that replicas in several clusters (active-passive across regions)
// elect one leader among them. Its one leader-only Runnable logs while
// it leads, under the lock's LeaseContext.
//
// Running it needs a Kubernetes API server (the manager's clients are
// built from the kubeconfig: KUBECONFIG, ~/.kube/config or the pod's
// service account), the bucket in BUCKET, and the AWS environment
// (credentials, AWS_REGION, AWS_ENDPOINT_URL_S3 for MinIO). Each replica
// needs its own identity: POD_NAME, else the host name. Its test runs
// the election part, two managers on MinIO, without a cluster.
//
//	BUCKET=locks AWS_ENDPOINT_URL_S3=http://127.0.0.1:9000 go run . -key leader/my-controller.json
//
// docs/kubernetes.md walks through it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/s3lect/s3lect/k8slock"
	"github.com/s3lect/s3lect/store/s3store"
)

func main() {
	key := flag.String("key", "leader/k8smanager.json", "the lock's object key, the same for every replica")
	flag.Parse()
	ctx := ctrl.SetupSignalHandler() // SIGTERM or SIGINT ends it
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		identity, _ = os.Hostname()
	}
	st, err := s3store.FromEnvironment(ctx, os.Getenv("BUCKET"), false)
	if err != nil {
		log.Fatal(err)
	}
	lock, err := k8slock.New(k8slock.Config{Store: st, Key: *key, Identity: identity})
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Fatalf("no Kubernetes API server to talk to (%v): run it in a cluster or with KUBECONFIG set; "+
			"the election alone runs without one: go test -run TestTwoManagersElectOnMinIO -v ./examples/k8smanager (docs/kubernetes.md)", err)
	}
	if err := run(ctx, cfg, lock, log.Default()); err != nil {
		log.Fatal(err)
	}
}

// run starts a manager that elects its leader with lock and returns when
// ctx ends (after releasing the lock) or leadership is lost.
func run(ctx context.Context, cfg *rest.Config, lock *k8slock.Lock, logger *log.Logger) error {
	mgr, err := manager.New(cfg, manager.Options{
		LeaderElection:                      true,
		LeaderElectionResourceLockInterface: lock,
		// Safe only because the leader's work ends with the manager's
		// context, before the release: the Runnable below returns when
		// its context ends.
		LeaderElectionReleaseOnCancel: true,
		// client-go's defaults, stated: the lease is 15s; the leader
		// gives up after 10s of failed renewals; everyone retries every
		// 2s (jittered up to 1.2 times more for candidates).
		LeaseDuration: ptr(15 * time.Second),
		RenewDeadline: ptr(10 * time.Second),
		RetryPeriod:   ptr(2 * time.Second),
		Metrics:       metricsserver.Options{BindAddress: "0"}, // off in the example
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	// A Runnable needs leader election unless it says otherwise: it
	// starts only on the leader. Add your controllers the same way
	// (ctrl.NewControllerManagedBy(mgr)...).
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		work := lock.LeaseContext(ctx) // ends before any other replica can lead
		logger.Printf("%s: leading, term %d", lock.Identity(), lock.Term())
		for tick := time.NewTicker(time.Second); ; {
			select {
			case <-work.Done():
				tick.Stop()
				logger.Printf("%s: stopped leading: %v", lock.Identity(), context.Cause(work))
				return nil
			case <-tick.C:
				if work.Err() != nil { // reads the clock: set at once after a pause past the lease
					continue
				}
				// the leader's work goes here
			}
		}
	}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func ptr[T any](v T) *T { return &v }
