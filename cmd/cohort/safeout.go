package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// safeWriter writes what the CLI prints with every control character but
// newline and tab spelled out as an escape (\x1b, \x07, \u007f, \u0085,
// ...). DEL and the C1 characters, which encoding/json leaves raw inside
// strings, are spelled \uXXXX, an escape JSON reads too, so --output json
// stays valid and decodes to the ids as they are. Group
// ids, member ids, client ids, topic names and server messages come from
// clients, and Kafka restricts none of their characters: printed raw, an id
// holding a terminal escape sequence could retitle the operator's terminal,
// clear it or move the cursor over other output.
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	clean := true
	for i := 0; i < len(p); i++ {
		if isControlByte(p, i) {
			clean = false
			break
		}
	}
	if clean {
		return s.w.Write(p)
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] < 0xa0: // C1, U+0080..U+009F
			fmt.Fprintf(&b, `\u%04x`, p[i+1])
			i++
		case p[i] == 0x7f:
			b.WriteString(`\u007f`)
		case isControlByte(p, i):
			fmt.Fprintf(&b, `\x%02x`, p[i])
		default:
			b.WriteByte(p[i])
		}
	}
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isControlByte reports whether p[i] starts a control character other than
// newline and tab: C0, DEL, or a C1 character (two bytes in UTF-8).
func isControlByte(p []byte, i int) bool {
	c := p[i]
	switch {
	case c == '\n' || c == '\t':
		return false
	case c < 0x20 || c == 0x7f:
		return true
	case c == 0xc2 && i+1 < len(p):
		return p[i+1] >= 0x80 && p[i+1] < 0xa0
	}
	return false
}

// oneLine is s with its newlines and tabs spelled \n and \t: an error is
// printed as one line, and the ids and server messages inside it must not
// break it into lines that read as output of their own.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}

// errorLines is err as the lines the CLI prints: one per error that
// errors.Join put together (several partitions or topics refused), each
// made one line by oneLine.
func errorLines(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var lines []string
		for _, e := range j.Unwrap() {
			lines = append(lines, errorLines(e)...)
		}
		return lines
	}
	return []string{oneLine(err.Error())}
}

// cell is s for a table cell: quoted, Go style, when it holds a control
// character, a tab or a newline, which would otherwise break the table's
// columns or forge a row of their own.
func cell(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return strconv.Quote(s)
		}
	}
	return s
}

// cells is cell of each of ss.
func cells(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = cell(s)
	}
	return out
}
