// Package testlog holds what tests use to read a log that a component's
// goroutines write while the test runs.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that several goroutines may write while a test
// reads it: point a slog handler at it, then look for lines in String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
