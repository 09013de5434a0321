// Package testlog holds what tests use to read a log that a component's
// goroutines write while the test runs, and to send such a log to the
// test without a late line panicking the test binary.
package testlog

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
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

// Writer returns a writer for the logger of a component that test t
// starts. While t runs, each write goes to t.Log (surrounding space
// trimmed). Once t has ended (from its cleanups on), writes go to stderr
// with the test's name instead: a goroutine that outlives its test, such
// as a member whose Close gave up waiting, may still log, and t.Log
// panics ("Log in goroutine after ... has completed") when it is called
// after every test of the binary has finished.
func Writer(t testing.TB) io.Writer {
	return writerTo(t, os.Stderr)
}

func writerTo(t testing.TB, late io.Writer) io.Writer {
	w := &tbWriter{t: t, name: t.Name(), late: late}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ended = true
	})
	return w
}

type tbWriter struct {
	t     testing.TB
	name  string
	late  io.Writer
	mu    sync.Mutex // held across t.Log, so that no write reaches t after ended is set
	ended bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		fmt.Fprintf(w.late, "%s (logged after the test ended): %s\n", w.name, line)
		return len(p), nil
	}
	w.t.Log(line)
	return len(p), nil
}

// Printf returns a printf-style logging function for a component that test
// t starts and that takes such a function instead of an io.Writer (e.g.
// kafka-go's LoggerFunc). Each call writes one line, prefix first, through
// Writer(t), so a call after t has ended goes to stderr instead of
// panicking the test binary.
func Printf(t testing.TB, prefix string) func(format string, args ...any) {
	return printfTo(Writer(t), prefix)
}

func printfTo(w io.Writer, prefix string) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, "%s%s", prefix, fmt.Sprintf(format, args...))
	}
}
