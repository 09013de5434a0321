package principal

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// template is a parsed Java replacement string (Matcher.appendReplacement
// syntax): literal text and group references.
type template []piece

// piece is literal text, or a group reference when group >= 0.
type piece struct {
	text  string
	group int
}

// parseTemplate parses a Java replacement for re: '\' makes the next
// character literal; $n refers to group n, taking as many digits as still
// name a group ("$12" is group 1 then "2" when there are fewer than 12
// groups); ${name} refers to a named group.
//
// Kafka (SslPrincipalMapper.escapeLiteralBackReferences) turns a $n whose
// first digit is past the pattern's groups into literal text, when the
// pattern has groups; without groups Java fails on it, and so does this,
// earlier.
func parseTemplate(repl string, re *regexp.Regexp) (template, error) {
	groups := re.NumSubexp()
	var t template
	var lit strings.Builder
	ref := func(g int) {
		if lit.Len() > 0 {
			t = append(t, piece{text: lit.String(), group: -1})
			lit.Reset()
		}
		t = append(t, piece{group: g})
	}
	for i := 0; i < len(repl); {
		switch c := repl[i]; c {
		case '\\':
			i++
			if i == len(repl) {
				return nil, fmt.Errorf("replacement %q ends in an escaping backslash", repl)
			}
			_, size := utf8.DecodeRuneInString(repl[i:])
			lit.WriteString(repl[i : i+size])
			i += size
		case '$':
			i++
			if i == len(repl) {
				return nil, fmt.Errorf("replacement %q ends in '$' without a group", repl)
			}
			if repl[i] == '{' {
				end := i + 1
				for end < len(repl) && isASCIIAlnum(repl[end]) {
					end++
				}
				name := repl[i+1 : end]
				if end == len(repl) || repl[end] != '}' || name == "" {
					return nil, fmt.Errorf("replacement %q: malformed group name after '${'", repl)
				}
				g := re.SubexpIndex(name)
				if g < 0 {
					return nil, fmt.Errorf("replacement %q: no group named %q", repl, name)
				}
				ref(g)
				i = end + 1
				continue
			}
			d := int(repl[i]) - '0'
			switch {
			case d < 0 || d > 9:
				return nil, fmt.Errorf("replacement %q: '$' followed by %q, not a group (write \\$ for a '$')", repl, repl[i])
			case d > groups && groups == 0:
				return nil, fmt.Errorf("replacement %q: no group %d in a pattern without groups", repl, d)
			case d > groups:
				lit.WriteByte('$') // the digits follow as literal text
				continue
			}
			g := d
			for i++; i < len(repl) && '0' <= repl[i] && repl[i] <= '9'; i++ {
				next := g*10 + int(repl[i]-'0')
				if next > groups {
					break
				}
				g = next
			}
			ref(g)
		default:
			lit.WriteByte(c)
			i++
		}
	}
	if lit.Len() > 0 {
		t = append(t, piece{text: lit.String(), group: -1})
	}
	return t, nil
}

func isASCIIAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// expand writes the template for one match m (submatch indices into s);
// a group that did not participate adds nothing, as in Java.
func (t template) expand(out *strings.Builder, s string, m []int) {
	for _, p := range t {
		switch {
		case p.group < 0:
			out.WriteString(p.text)
		case m[2*p.group] >= 0:
			out.WriteString(s[m[2*p.group]:m[2*p.group+1]])
		}
	}
}
