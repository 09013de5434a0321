package workers

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/member"
)

// A resource whose name does not fit the 16-bit length of the encoding is left
// out of the plan (and logged by its length, not its bytes); the others are
// still assigned and every member's assignment decodes.
func TestAssignLeavesOutNamesTooLongToEncode(t *testing.T) {
	long := strings.Repeat("x", maxNameLen+1)
	fits := strings.Repeat("y", maxNameLen)
	var logged bytes.Buffer
	p := &Pool{
		log: slog.New(slog.NewTextHandler(&logged, nil)),
		cfg: Config{Resources: func(context.Context) ([]Resource, error) {
			return []Resource{{Name: "a"}, {Name: long}, {Name: fits}, {Name: "b"}}, nil
		}},
	}
	g := member.Generation{Members: []member.GroupMember{
		{ID: "m1", Metadata: encodeNames(nil)},
		{ID: "m2", Metadata: encodeNames(nil)},
	}}
	out, err := p.assign(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for id, b := range out {
		names, err := decodeNames(b)
		if err != nil {
			t.Fatalf("assignment of %s does not decode: %v", id, err)
		}
		all = append(all, names...)
	}
	slices.Sort(all)
	if want := []string{"a", "b", fits}; !slices.Equal(all, want) {
		t.Fatalf("assigned %d names %q…, want a, b and the 65535-byte name", len(all), abbreviate(all))
	}
	if !strings.Contains(logged.String(), "bytes=65536") {
		t.Fatalf("the left-out resource is not logged with its length: %q", abbreviate([]string{logged.String()}))
	}
	if strings.Contains(logged.String(), long[:200]) {
		t.Fatal("the log line carries the whole name")
	}
}

func abbreviate(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s[:min(len(s), 80)]
	}
	return out
}

// The metadata and assignment decoder never panics, and whatever it accepts
// encodes back to the bytes it read (trailing bytes aside); names that fit
// round-trip.
func FuzzDecodeNames(f *testing.F) {
	f.Add(encodeNames([]string{"a", "bb", ""}))
	f.Add(encodeNames(nil))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0, 1})
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := decodeNames(b)
		if err == nil && len(b) > 0 {
			enc := encodeNames(names)
			if !bytes.HasPrefix(b, enc) {
				t.Fatalf("decoded %q from %x, which encodes to %x", names, b, enc)
			}
		}
		// The input read as a list of names (split at zero bytes).
		split := strings.Split(string(b), "\x00")
		back, err := decodeNames(encodeNames(split))
		if err != nil || !slices.Equal(back, split) {
			t.Fatalf("round trip of %q: %q, %v", split, back, err)
		}
	})
}

// TestFormatTails: the metadata's refusal count and the assignment's member
// id follow the names, which decoders of the first release read alone; an
// assignment without the id (an older leader) reads with none; a member
// whose metadata the leader cannot read fails the assignment instead of
// being planned as running nothing (its resources could start twice).
func TestFormatTails(t *testing.T) {
	md := encodeMetadata([]string{"a", "b"}, 2)
	if names, err := decodeNames(md); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("metadata: %q, %v", names, err)
	}
	names, id, err := decodeAssignment(encodeAssignment([]string{"x"}, "member-1"))
	if err != nil || id != "member-1" || !slices.Equal(names, []string{"x"}) {
		t.Errorf("assignment: %q %q %v", names, id, err)
	}
	if names, id, err := decodeAssignment(encodeNames([]string{"x"})); err != nil || id != "" || len(names) != 1 {
		t.Errorf("first-release assignment: %q %q %v", names, id, err)
	}
	if _, _, err := decodeAssignment(append(encodeNames(nil), 0, 9, 'm')); err == nil {
		t.Error("a truncated member id read")
	}
	p := &Pool{log: slog.New(slog.DiscardHandler), cfg: Config{Resources: func(context.Context) ([]Resource, error) {
		return []Resource{{Name: "r0"}, {Name: "r1"}}, nil
	}}}
	g := member.Generation{Members: []member.GroupMember{
		{ID: "old", Metadata: encodeNames([]string{"r0"})},
		{ID: "new", Metadata: []byte{1, 0, 0, 0, 2, 0, 2, 'r', '0', 0, 2, 'r', '1'}},
	}}
	if out, err := p.assign(context.Background(), g); err == nil {
		t.Errorf("assigned %v with a member's metadata unreadable", out)
	}
}
