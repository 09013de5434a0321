package workers

import (
	"fmt"
	"sync"
)

// StaleTokenError is returned by Fence for a token whose generation is below
// one the fence has already admitted for the same resource.
type StaleTokenError struct {
	Token   Token
	Highest int32
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("workers: stale token %v (%s has been written at generation %d)",
		e.Token, e.Token.Resource, e.Highest)
}

// Fence shows the rule a store that resources write to must apply to be safe
// from a former owner, including one frozen past its lease: per resource, it
// admits a write only if the token's generation is at least the highest one
// admitted so far for that resource. A real store keeps the highest
// generation next to the data of the resource (a column compared in the same
// transaction as the write, an object-store precondition, a field of the file
// header), so that check and write are atomic.
//
// The zero Fence is ready to use.
type Fence struct {
	mu      sync.Mutex
	highest map[string]int32
}

// Admit checks t and, if it is current, records it. Perform the write only
// when Admit returns nil, under the same lock or transaction (or use Do).
func (f *Fence) Admit(t Token) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.admitLocked(t)
}

// Do runs write while holding the fence if t is current, so that no newer
// owner can be admitted between the check and the write.
func (f *Fence) Do(t Token, write func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.admitLocked(t); err != nil {
		return err
	}
	return write()
}

func (f *Fence) admitLocked(t Token) error {
	if h, ok := f.highest[t.Resource]; ok && t.Generation < h {
		return &StaleTokenError{Token: t, Highest: h}
	}
	if f.highest == nil {
		f.highest = map[string]int32{}
	}
	f.highest[t.Resource] = t.Generation
	return nil
}

// Highest returns the highest generation admitted for resource (-1 if none).
func (f *Fence) Highest(resource string) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.highest[resource]; ok {
		return h
	}
	return -1
}
