package clientconfig

import (
	"maps"
	"strings"
	"testing"
)

// escapeProperty writes s as a java.util.Properties key or value that
// reads back as s.
func escapeProperty(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '=', ':', ' ', '#', '!':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\t':
			b.WriteString(`\t`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzJavaProperties: any file either fails or parses, and what it parses
// to written back (escaped) parses to the same properties.
func FuzzJavaProperties(f *testing.F) {
	f.Add("a=b\nc : d\\\n   e\r\n# x\\\n! y\nf\\ g=h\\u00e9\\ud83d\\ude00\n")
	f.Add("key\\\n")
	f.Add("k=\\u12")
	f.Add("=\n:\n \\=\\:\\\\ = \\ x ")
	f.Fuzz(func(t *testing.T, in string) {
		props, err := parseJavaProperties(strings.NewReader(in))
		if err != nil {
			return
		}
		var out strings.Builder
		for k, v := range props {
			out.WriteString(escapeProperty(k) + "=" + escapeProperty(v) + "\n")
		}
		back, err := parseJavaProperties(strings.NewReader(out.String()))
		if err != nil || !maps.Equal(back, props) {
			t.Fatalf("%q parsed to %q; written back as %q it parses to %q, %v", in, props, out.String(), back, err)
		}
	})
}
