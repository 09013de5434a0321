package principal

import (
	"errors"
	"testing"
)

// FuzzParseRules checks that any configuration text parses or fails
// cleanly, and that parsed rules map any DN or fail with
// ErrNoMatchingRule.
func FuzzParseRules(f *testing.F) {
	f.Add(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`, "CN=Duke,OU=ServiceUsers,O=Org")
	f.Add(`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/`, ",RULE:,")
	f.Add(`RULE:(\w+)=(\w+?)/$2@$1$9${x}/`, "a=b")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		r, err := ParseRules(rules)
		if err != nil {
			return
		}
		if _, err := r.Map(dn); err != nil && !errors.Is(err, ErrNoMatchingRule) {
			t.Fatalf("Map(%q) with %s: %v", dn, r, err)
		}
	})
}

// FuzzSubjectDN checks that any subject bytes print or fail cleanly.
func FuzzSubjectDN(f *testing.F) {
	f.Add([]byte{0x30, 0x00})
	f.Add([]byte{0x30, 0x0f, 0x31, 0x0d, 0x30, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x04, 'a', ',', ' ', 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = subjectDN(raw)
	})
}
