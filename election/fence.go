package election

import (
	"fmt"
	"sync"
)

// StaleTokenError is returned by Fence.Admit for a token older than one the
// fence has already admitted.
type StaleTokenError struct {
	Token, Highest int32
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("election: stale fencing token %d (a writer with token %d has written)", e.Token, e.Highest)
}

// Fence shows how a resource protects itself from former writers: it admits
// a write only if its token is at least the highest token admitted so far.
// A real resource keeps the highest token with the data it protects (a column
// checked in the same transaction as the write, an object-store precondition,
// a field of the file header) so that the check and the write are atomic.
type Fence struct {
	mu      sync.Mutex
	highest int32
	seen    bool
}

// Admit checks token and, if it is current, records it. The caller performs
// the write only when Admit returns nil, under the same lock or transaction.
func (f *Fence) Admit(token int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen && token < f.highest {
		return &StaleTokenError{Token: token, Highest: f.highest}
	}
	f.highest, f.seen = token, true
	return nil
}

// Do runs write while holding the fence if token is current, so that no newer
// writer can be admitted between the check and the write.
func (f *Fence) Do(token int32, write func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen && token < f.highest {
		return &StaleTokenError{Token: token, Highest: f.highest}
	}
	f.highest, f.seen = token, true
	return write()
}

// Highest returns the highest token admitted so far (-1 if none).
func (f *Fence) Highest() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.seen {
		return -1
	}
	return f.highest
}
