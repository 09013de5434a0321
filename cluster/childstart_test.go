package cluster_test

import (
	"strings"
	"testing"
	"time"
)

// TestChildEndsBeforeAddr: a child node that dies before it gives its
// address (here it panics at once, as a bug in its start-up would) fails
// startChild as soon as it has ended, saying how it ended (exit status 2,
// Go's for a panic) and quoting its last lines of standard error (the
// panic), rather than after the whole wait for its address (60 s), with
// nothing but a timeout to say.
func TestChildEndsBeforeAddr(t *testing.T) {
	const why = "a start-up bug of this test's making"
	ft := &fatalTB{TB: t}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		startChildEnv(ft, 1, childStartWait, "COHORT_TEST_CHILD_PANIC="+why)
	}()
	<-done // at most childStartWait
	msg := ft.message()
	t.Logf("startChild failed after %v: %s", time.Since(start).Round(time.Millisecond), msg)
	for _, want := range []string{"ended before it gave its address", "exit status 2", "panic: " + why} {
		if !strings.Contains(msg, want) {
			t.Errorf("startChild's failure does not say %q", want)
		}
	}
}
