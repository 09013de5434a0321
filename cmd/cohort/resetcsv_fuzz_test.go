package main

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzResetCSV feeds arbitrary --from-file contents (a file someone wrote
// or exported, perhaps cut short or edited by hand) to parseResetCSV. A
// file is refused, or each of its topic,partition,offset lines becomes one
// entry of the plan, and the plan written back as such a file reads the
// same: nothing of a line is dropped or read as something else.
func FuzzResetCSV(f *testing.F) {
	f.Add([]byte("orders,0,12\norders,1,0\n"))
	f.Add([]byte("# exported\n\n payments , 3 , 9223372036854775807 \r\n"))
	f.Add([]byte("a,2147483647,5"))
	f.Add([]byte("a,1,2,3\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := parseResetCSV(strings.NewReader(string(in)), "plan.csv")
		if err != nil {
			if out != nil {
				t.Fatalf("%q refused (%v) with a plan of %d", in, err, len(out))
			}
			return
		}
		lines := 0
		for l := range strings.SplitSeq(string(in), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines++
			}
		}
		if len(out) == 0 || len(out) != lines {
			t.Fatalf("%q: %d lines read as %d entries", in, lines, len(out))
		}
		var b strings.Builder
		for k, o := range out {
			if k.topic == "" || strings.Contains(k.topic, ",") || k.topic != strings.TrimSpace(k.topic) || k.partition < 0 || o < 0 {
				t.Fatalf("%q: entry %q partition %d offset %d", in, k.topic, k.partition, o)
			}
			fmt.Fprintf(&b, "%s,%d,%d\n", k.topic, k.partition, o)
		}
		again, err := parseResetCSV(strings.NewReader(b.String()), "again.csv")
		if err != nil || len(again) != len(out) {
			t.Fatalf("%q: the plan written back, %q, reads as %v (%v)", in, b.String(), again, err)
		}
		for k, o := range out {
			if again[k] != o {
				t.Fatalf("%q: %v offset %d reads back as %d", in, k, o, again[k])
			}
		}
	})
}
