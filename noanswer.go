package s3lect

import (
	"context"
	"errors"
	"fmt"

	"github.com/s3lect/s3lect/store"
)

// A store that has not answered once since the elector started is almost
// always misconfigured (a wrong endpoint, no DNS, a firewall), not down:
// the elector says so at once, at WARN, and in Change.Err and Stats,
// instead of retrying silently. It keeps retrying all the same.

// heard takes in the outcome err of a store call: any answer of the store
// (a success, an absent object, a refused condition, a refusal for good)
// shows it is reachable; the first other failure before one is logged at
// WARN.
func (sh *shared) heard(err error, emit func(effect)) {
	switch {
	case sh.answered:
	case err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrPreconditionFailed) || store.IsPermanent(err):
		sh.answered = true
	case errors.Is(err, context.Canceled):
	case !sh.warned:
		sh.warned = true
		emit(doWarn{"the store has not answered since this elector started: check its endpoint (AWS_ENDPOINT_URL_S3 for MinIO and " +
			"other S3-compatible stores), DNS and network; retrying", []any{"err", err}})
	}
}

// readErr is a failed read's error as Change.Err reports it: wrapped in
// ErrNeverAnswered while the store has never answered.
func (sh *shared) readErr(err error) error {
	if err == nil || sh.answered {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNeverAnswered, err)
}

// doWarn is a log line at WARN. Executors that cannot log at WARN (a
// test's) log it as any other line.
type doWarn doLog

func (f doWarn) do(x executor) {
	if w, ok := x.(interface{ warn(doWarn) }); ok {
		w.warn(f)
		return
	}
	x.log(doLog(f))
}

func (lp *loop) warn(f doWarn) { lp.e.log.Warn(f.msg, f.args...) }
