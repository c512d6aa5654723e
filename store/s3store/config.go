package s3store

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// LoadConfig loads the SDK's default configuration (the standard AWS
// environment, shared config files, instance roles) and checks that it
// finds credentials (CheckCredentials). While it looks them up, the SDK's
// own log lines are held back: when none is found, the permanent
// ErrNoCredentials error, which names what to set, is all that is said,
// not preceded by the SDK's warnings about the metadata endpoint (such as
// "falling back to IMDSv1"). When some are found, the held lines are
// written then, and later ones at once, to stderr as the SDK would.
// FromEnvironment and store/storeurl use it.
func LoadConfig(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	held := &heldLogger{out: logging.NewStandardLogger(sdkLog), holding: true}
	cfg, err := config.LoadDefaultConfig(ctx, append([]func(*config.LoadOptions) error{config.WithLogger(held)}, optFns...)...)
	if err != nil {
		return cfg, fmt.Errorf("s3store: load AWS configuration: %w", err)
	}
	err = CheckCredentials(ctx, cfg)
	held.release(err == nil)
	return cfg, err
}

// sdkLog is where the SDK's log lines go: stderr, as the SDK's default
// logger writes them (tests capture it).
var sdkLog io.Writer = os.Stderr

// heldLogger holds the SDK's log lines back until release.
type heldLogger struct {
	mu      sync.Mutex
	out     logging.Logger
	holding bool
	held    []heldLine
}

type heldLine struct {
	class  logging.Classification
	format string
	v      []any
}

func (l *heldLogger) Logf(class logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holding {
		l.held = append(l.held, heldLine{class, format, v})
		return
	}
	l.out.Logf(class, format, v...)
}

// release stops holding lines back; it writes the held ones if write.
func (l *heldLogger) release(write bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if write {
		for _, h := range l.held {
			l.out.Logf(h.class, h.format, h.v...)
		}
	}
	l.holding, l.held = false, nil
}
