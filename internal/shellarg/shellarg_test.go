package shellarg

import (
	"os/exec"
	"strings"
	"testing"
)

// TestQuote: every id comes back unchanged from a shell that reads the
// quoted word, and none runs anything.
func TestQuote(t *testing.T) {
	ids := []string{"plain-id_1.2", "x; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "it's", "a b",
		"evil\nfake\ttab", "esc\x1b]0;t\x07", "rlo\u202ex", "lone\x9b", "back\\slash\"", "", "組 🙂", "'$'\\'"}
	for _, id := range ids {
		q := Quote(id)
		if strings.ContainsAny(q, "\n\x1b\x07\u202e") || strings.IndexByte(q, 0x9b) >= 0 {
			t.Errorf("Quote(%q) = %q holds a control character", id, q)
		}
		for _, sh := range []string{"bash", "zsh"} {
			path, err := exec.LookPath(sh)
			if err != nil {
				continue
			}
			dir := t.TempDir()
			cmd := exec.Command(path, "-c", "printf %s "+q)
			cmd.Dir = dir
			out, err := cmd.Output()
			if err != nil || string(out) != id {
				t.Errorf("%s read Quote(%q) = %s as %q (%v)", sh, id, q, out, err)
			}
		}
	}
	for in, want := range map[string]string{
		"g1": "g1", "x; y": "'x; y'", "it's": `'it'\''s'`, "a\nb'": `$'a\nb\''`, "": "''",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Arg("--bootstrap=evil:9092"); got != "-- --bootstrap=evil:9092" {
		t.Errorf("Arg of a flag-like id: %s", got)
	}
}
