package testchild

import (
	"fmt"
	"strings"
	"testing"
)

// TestLastLines: lines cut across writes come out whole, only the last
// keptLines are kept, and an unfinished last line comes out too.
func TestLastLines(t *testing.T) {
	var l lastLines
	var all strings.Builder
	for i := range 30 {
		fmt.Fprintf(&all, "line %d\n", i)
	}
	all.WriteString("unfinished")
	s := all.String()
	for i := 0; i < len(s); i += 7 { // writes that cut lines anywhere
		l.write([]byte(s[i:min(i+7, len(s))]))
	}
	got := l.lines()
	want := []string{}
	for i := 30 - keptLines + 1; i < 30; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	want = append(want, "unfinished")
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines() = %q, want %q", got, want)
	}
	l.write([]byte(strings.Repeat("x", 3*maxLine)))
	if got := l.lines(); len(got[len(got)-1]) != maxLine {
		t.Fatalf("an unfinished line of %d bytes is kept as %d bytes, want its last %d", 3*maxLine+len("unfinished"), len(got[len(got)-1]), maxLine)
	}
}
