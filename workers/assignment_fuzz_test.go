package workers

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodeAssignment: the assignment a member receives was written by
// whichever member led the generation (another process, perhaps another
// version). It is refused, or read as names and a member id that encode
// back to the bytes it came from (bytes after them aside, which the
// format's later versions may add); names and an id that fit read back as
// they were written.
func FuzzDecodeAssignment(f *testing.F) {
	f.Add(encodeAssignment([]string{"a", "bb", ""}, "member-1"))
	f.Add(encodeAssignment(nil, ""))
	f.Add(encodeNames([]string{"x"}))
	f.Add(append(encodeNames(nil), 0, 9, 'm'))
	f.Fuzz(func(t *testing.T, b []byte) {
		names, id, err := decodeAssignment(b)
		if err != nil {
			if names != nil || id != "" {
				t.Fatalf("%x refused (%v), yet read as %q for %q", b, err, names, id)
			}
		} else if len(b) > 0 {
			enc := encodeNames(names)
			if id != "" {
				enc = encodeAssignment(names, id)
			}
			if !bytes.HasPrefix(b, enc) {
				t.Fatalf("%x read as %q for %q, which encode to %x", b, names, id, enc)
			}
		}
		// The input as names (split at zero bytes) and an id.
		split := strings.Split(string(b), "\x00")
		back, backID, err := decodeAssignment(encodeAssignment(split, string(b)))
		if err != nil || !slices.Equal(back, split) || (len(b) <= 0xffff && backID != string(b)) {
			t.Fatalf("round trip of %q for %q: %q for %q, %v", split, b, back, backID, err)
		}
	})
}
