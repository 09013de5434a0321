package clientconfig

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
)

// parseJavaProperties reads the subset of java.util.Properties' text format
// that Kafka client property files use:
//
//   - natural lines end at \n, \r or \r\n;
//   - a line whose first non-blank character is # or ! is a comment (a
//     trailing backslash does not continue it);
//   - a line ending in an odd number of backslashes continues on the next,
//     whose leading blanks (space, tab, form feed) are dropped;
//   - the key ends at the first unescaped '=', ':' or blank; blanks around
//     the separator are dropped, and the value is the rest of the line
//     (trailing blanks kept, as Java does);
//   - escapes \t \n \r \f \uXXXX in keys and values; a backslash before any
//     other character stands for that character (\=, \:, \#, \\, "\ ").
//
// A later key replaces an earlier one. Errors name the line, never its
// contents (a line may hold a password).
func parseJavaProperties(r io.Reader) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	sc.Split(scanNaturalLines)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		first := lineNo
		line := trimBlanksLeft(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines.
		var logical strings.Builder
		for {
			if !endsInEscape(line) {
				logical.WriteString(line)
				break
			}
			logical.WriteString(line[:len(line)-1])
			if !sc.Scan() {
				break // Java drops a backslash at the end of input
			}
			lineNo++
			line = trimBlanksLeft(sc.Text())
		}
		key, value, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", first, err)
		}
		props[key] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("properties: %w", err)
	}
	return props, nil
}

// scanNaturalLines is bufio.ScanLines that also ends a line at a lone \r.
func scanNaturalLines(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // need to see whether \n follows
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimBlanksLeft(s string) string {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	return s[i:]
}

// endsInEscape reports whether s ends with an odd number of backslashes.
func endsInEscape(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line (leading blanks removed) into its
// unescaped key and value.
func splitProperty(line string) (string, string, error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // the escaped character never ends the key
			continue
		}
		if c == '=' || c == ':' || isBlank(c) {
			end = i
			break
		}
	}
	key, rest := line[:end], line[end:]
	rest = trimBlanksLeft(rest)
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = trimBlanksLeft(rest[1:])
	}
	k, err := unescape(key)
	if err != nil {
		return "", "", err
	}
	v, err := unescape(rest)
	if err != nil {
		return "", "", err
	}
	return k, v, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break // a lone trailing backslash is dropped
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uxxxx escape`)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uxxxx escape`)
			}
			i += 4
			r := rune(n)
			// A character outside the BMP is written as two escapes, a
			// UTF-16 surrogate pair.
			if utf16.IsSurrogate(r) && strings.HasPrefix(s[i+1:], `\u`) && len(s) >= i+7 {
				if lo, err := strconv.ParseUint(s[i+3:i+7], 16, 16); err == nil {
					if p := utf16.DecodeRune(r, rune(lo)); p != unicode.ReplacementChar {
						r, i = p, i+6
					}
				}
			}
			b.WriteRune(r)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
