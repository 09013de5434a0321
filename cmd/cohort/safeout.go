package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// safeWriter writes what the CLI prints with every control character but
// newline and tab spelled out as an escape (\x1b, \x07, \u007f, \u0085,
// ...), and so are the bidirectional controls (\u202e) and bytes that are
// not UTF-8 (\x9b). DEL, the C1 characters and the bidirectional controls,
// which encoding/json leaves raw inside strings, are spelled \uXXXX, an
// escape JSON reads too, so --output json stays valid and decodes to the ids
// as they are (encoding/json writes no byte that is not UTF-8). Group
// ids, member ids, client ids, topic names and server messages come from
// clients, and Kafka restricts none of their characters: printed raw, an id
// holding a terminal escape sequence could retitle the operator's terminal,
// clear it or move the cursor over other output.
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	clean := true
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 && p[i] != '\n' && p[i] != '\t' || p[i] >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s.w.Write(p)
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1 && utf8.FullRune(p[i:]):
			// A byte that starts no character: in a terminal that reads
			// bytes as Latin-1, 0x9b alone is CSI.
			fmt.Fprintf(&b, `\x%02x`, p[i])
		case r == utf8.RuneError && size == 1:
			// The start of a character whose end is in the next Write.
			b.Write(p[i:])
			size = len(p) - i
		case r == 0x7f || r >= 0x80 && r < 0xa0 || bidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r < 0x20 && r != '\n' && r != '\t':
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.Write(p[i : i+size])
		}
		i += size
	}
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// bidiControl reports whether r is one of the characters that reorder the
// text around them (the embeddings, overrides and isolates of Unicode's
// bidirectional algorithm, and its marks): an id holding U+202E (RIGHT-TO-
// LEFT OVERRIDE) shows the rest of its line backwards wherever the line is
// laid out for bidirectional text, a terminal that does so or a chat or
// ticket it is pasted into, and can make a row read as something else.
func bidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
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

// cell is s for a table cell: quoted, Go style, when it holds a character
// strconv does not count printable (a control character, a tab, a newline,
// a bidirectional control, a space other than ' ') or a byte that is not
// UTF-8: the first three would break the table's columns or forge a row of
// their own, a bidirectional control reorders the rest of the row, and an
// invisible character would make two ids look the same.
func cell(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !strconv.IsPrint(r) {
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
