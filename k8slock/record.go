package k8slock

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/s3lect/s3lect/store"
)

// format names the object's format in its "lock" field, so that a key
// that holds something else (an s3lect Elector's lockfile, say) is
// refused instead of read as a vacant lock.
const format = "k8slock/v1"

// object is the stored form of a LeaderElectionRecord: client-go's fields
// with times to the nanosecond (a Lease keeps microseconds), and a random
// write ID.
type object struct {
	Lock                 string    `json:"lock"`
	HolderIdentity       string    `json:"holderIdentity"`
	LeaseDurationSeconds int       `json:"leaseDurationSeconds"`
	AcquireTime          time.Time `json:"acquireTime"`
	RenewTime            time.Time `json:"renewTime"`
	LeaderTransitions    int       `json:"leaderTransitions"`
	Strategy             string    `json:"strategy,omitempty"`
	PreferredHolder      string    `json:"preferredHolder,omitempty"`
	WriteID              string    `json:"writeID"`
}

func encode(ler resourcelock.LeaderElectionRecord, writeID string) ([]byte, error) {
	if ler.LeaseDurationSeconds < 0 || ler.LeaderTransitions < 0 {
		return nil, fmt.Errorf("record with leaseDurationSeconds %d and leaderTransitions %d: neither may be negative", ler.LeaseDurationSeconds, ler.LeaderTransitions)
	}
	return json.Marshal(object{
		Lock:                 format,
		HolderIdentity:       ler.HolderIdentity,
		LeaseDurationSeconds: ler.LeaseDurationSeconds,
		AcquireTime:          ler.AcquireTime.Time,
		RenewTime:            ler.RenewTime.Time,
		LeaderTransitions:    ler.LeaderTransitions,
		Strategy:             string(ler.Strategy),
		PreferredHolder:      ler.PreferredHolder,
		WriteID:              writeID,
	})
}

// errNotALock is wrapped by Get's error for content that is not a lock
// record.
var errNotALock = errors.New("not a k8slock record")

func decode(data []byte) (*resourcelock.LeaderElectionRecord, error) {
	if len(data) > store.MaxObjectSize {
		return nil, fmt.Errorf("%w: the object is larger than %d bytes; delete it or use another key", errNotALock, store.MaxObjectSize)
	}
	var o object
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("%w: %v; delete it or use another key", errNotALock, err)
	}
	switch {
	case o.Lock != format:
		return nil, fmt.Errorf("%w: its lock field is %q, want %q (is it another program's object, an s3lect lockfile?); use another key", errNotALock, o.Lock, format)
	case o.LeaseDurationSeconds < 0 || o.LeaderTransitions < 0:
		return nil, fmt.Errorf("%w: leaseDurationSeconds %d and leaderTransitions %d may not be negative; delete it", errNotALock, o.LeaseDurationSeconds, o.LeaderTransitions)
	}
	return &resourcelock.LeaderElectionRecord{
		HolderIdentity:       o.HolderIdentity,
		LeaseDurationSeconds: o.LeaseDurationSeconds,
		AcquireTime:          metav1.NewTime(o.AcquireTime),
		RenewTime:            metav1.NewTime(o.RenewTime),
		LeaderTransitions:    o.LeaderTransitions,
		Strategy:             coordinationv1.CoordinatedLeaseStrategy(o.Strategy),
		PreferredHolder:      o.PreferredHolder,
	}, nil
}
