package logburst

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var l Limiter
	t0 := time.Unix(1000, 0)
	for i := range 3 * Max {
		l.Log(log, slog.LevelWarn, t0.Add(time.Duration(i)*time.Millisecond), "flood")
	}
	if n := strings.Count(buf.String(), "msg=flood"); n != Max {
		t.Fatalf("%d lines in one window, want %d", n, Max)
	}
	if strings.Contains(buf.String(), "unlogged_before") {
		t.Fatalf("a line in the first window names lines left out:\n%s", buf.String())
	}
	buf.Reset()
	l.Log(log, slog.LevelWarn, t0.Add(Window), "flood")
	if want := "unlogged_before=20"; !strings.Contains(buf.String(), want) {
		t.Fatalf("first line of the next window %q, want %s", buf.String(), want)
	}
	if ok, skipped := l.Allow(t0.Add(Window + time.Millisecond)); !ok || skipped != 0 {
		t.Fatalf("second line of the next window: ok %v, skipped %d; want true, 0", ok, skipped)
	}
}
