// Package examples_test builds the example programs and runs each briefly
// against an in-process cohort node.
package examples_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/member/membertest"
)

func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", bin, "github.com/cohort-dev/cohort/examples/"+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// runAll starts the binary once per name with args and returns each one's
// output after they exit (they stop themselves with -run-for).
func runAll(t *testing.T, bin string, names []string, args ...string) []string {
	t.Helper()
	outs := make([]string, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var buf bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, append([]string{"-name", n}, args...)...)
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Run(); err != nil {
				t.Errorf("%s %s: %v\n%s", bin, n, err, buf.String())
			}
			outs[i] = buf.String()
		}()
	}
	wg.Wait()
	return outs
}

func TestExamples(t *testing.T) {
	addr := membertest.StartCohort(t, nil).Addr()
	common := []string{"-addr", addr, "-session-timeout", "1s", "-run-for", "3s"}

	t.Run("election", func(t *testing.T) {
		outs := runAll(t, build(t, "election"), []string{"a", "b"}, common...)
		writers := 0
		for _, o := range outs {
			writers += strings.Count(o, "writer: active")
			if !strings.Contains(o, "candidate: done") {
				t.Fatalf("no clean exit:\n%s", o)
			}
		}
		if writers < 1 {
			t.Fatalf("no writer:\n%s", strings.Join(outs, "\n"))
		}
	})
	t.Run("workers", func(t *testing.T) {
		outs := runAll(t, build(t, "workers"), []string{"w1", "w2"}, append(common, "-resources", "6")...)
		for _, o := range outs {
			if !strings.Contains(o, "msg=start") || !strings.Contains(o, "worker: done") {
				t.Fatalf("worker did not run resources:\n%s", o)
			}
		}
	})
	t.Run("consumer", func(t *testing.T) {
		outs := runAll(t, build(t, "consumer"), []string{"c1", "c2"}, append(common, "-assignor", "cooperative-sticky")...)
		for _, o := range outs {
			if !strings.Contains(o, "msg=assigned") || !strings.Contains(o, "consumer: done") {
				t.Fatalf("consumer was not assigned:\n%s", o)
			}
		}
	})
}
