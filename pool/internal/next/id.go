package next

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxKeyLen is the longest object key the stores accept, in bytes.
const maxKeyLen = 1024

// CheckID returns why id cannot name a worker of the pool under prefix,
// or nil. Package pool's New checks the worker's own ID with it, and the
// peer handler every ID a report names: a report must never make the
// coordinator read a key the store refuses (MinIO answers every GET of a
// key with a NUL byte with 400).
func CheckID(prefix, id string) error {
	switch {
	case id == "":
		return errors.New("ID is empty; give this worker's unique name, such as its host name")
	case !utf8.ValidString(id) || strings.ContainsRune(id, 0):
		return fmt.Errorf("ID %q must be UTF-8 without NUL bytes, as object keys are", id)
	case strings.Contains(id, "/"):
		return fmt.Errorf("ID %q contains a slash; worker IDs name one object each", id)
	case len(prefix)+len("coordinator.json.term")+len(id) > maxKeyLen:
		return fmt.Errorf("Prefix or ID is too long: keys would exceed %d bytes", maxKeyLen)
	case len(id) > 255:
		return fmt.Errorf("ID %q is longer than 255 bytes", id)
	}
	return nil
}
