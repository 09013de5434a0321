package script

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	text := "# header\n\ncmd one\n----\nout 1\nout 2\n\n# between\ncmd two\n----\n\n# trailer\n"
	steps, trailer, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Cmd != "cmd one" || steps[0].Line != 3 || !slices.Equal(steps[0].Want, []string{"out 1", "out 2"}) ||
		!slices.Equal(steps[0].Pre, []string{"# header", ""}) || steps[1].Cmd != "cmd two" || len(steps[1].Want) != 0 ||
		!slices.Equal(steps[1].Pre, []string{"", "# between"}) {
		t.Fatalf("steps %+v", steps)
	}
	if !slices.Equal(trailer, []string{"", "# trailer"}) {
		t.Fatalf("trailer %q", trailer)
	}
	if _, _, err := Parse("cmd\nnot a separator\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a command without ----: %v", err)
	}
}

func TestArgs(t *testing.T) {
	a := ParseArgs([]string{"n=3", "d=2s", "l=x,y", "e=", "bad=z", "flag", "left=1"})
	if a.Int("n", 0) != 3 || a.Dur("d", 0) != 2*time.Second || !slices.Equal(a.List("l"), []string{"x", "y"}) ||
		len(a.List("e")) != 0 || a.List("absent") != nil || !a.Has("flag") || a.Str("none", "def") != "def" {
		t.Fatal("accessors")
	}
	a.Int("bad", 0)
	if len(a.Errs) != 1 || !strings.Contains(a.Errs[0], "bad") {
		t.Fatalf("errors %v", a.Errs)
	}
	if u := a.Unused(); !slices.Equal(u, []string{"left"}) {
		t.Fatalf("unused %v", u)
	}
	if k := ParseArgs([]string{"b=1", "a=2"}).Keys(); !slices.Equal(k, []string{"a", "b"}) {
		t.Fatalf("keys %v", k)
	}
}
