// Package logburst bounds the log lines that a remote party can make a node
// repeat (bad requests, failed logins, refused joins, storming groups): at
// most Max lines in each Window, the next line logged saying how many were
// left out (attribute unlogged_before). The metrics behind those lines
// still count every event; the log is for an operator to read, and a
// client in a loop must not fill the disk with it.
package logburst

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

const (
	// Max is how many lines a Limiter lets through per Window.
	Max = 10
	// Window is the period over which Max applies.
	Window = 10 * time.Second
)

// Limiter lets at most Max lines through per Window and counts the rest.
// The zero value is ready to use; it is safe for concurrent use.
type Limiter struct {
	mu      sync.Mutex
	start   time.Time
	n       int
	skipped int
}

// Allow reports whether a line may be logged at now, and how many were left
// out since the last one let through.
func (b *Limiter) Allow(now time.Time) (ok bool, skipped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.start) >= Window {
		b.start, b.n = now, 0
	}
	if b.n >= Max {
		b.skipped++
		return false, 0
	}
	b.n++
	skipped, b.skipped = b.skipped, 0
	return true, skipped
}

// Log logs msg at level if Allow lets it through at now, adding
// unlogged_before when lines were left out before it.
func (b *Limiter) Log(log *slog.Logger, level slog.Level, now time.Time, msg string, attrs ...any) {
	ok, skipped := b.Allow(now)
	if !ok {
		return
	}
	if skipped > 0 {
		attrs = append(attrs, "unlogged_before", skipped)
	}
	log.Log(context.Background(), level, msg, attrs...)
}
