// Package javastr compares strings as Java's String.compareTo does, for the
// assignors whose member order must match Kafka's (instance ids and member
// ids ordered by compareTo).
//
// Java compares UTF-16 code units; Go's < compares UTF-8 bytes, which is
// code point order. The two agree except between a character outside the
// Basic Multilingual Plane (U+10000 and up, two UTF-16 surrogate units
// starting 0xD800–0xDBFF) and one in U+E000–U+FFFF: Java puts the former
// first, Go the latter.
package javastr

import (
	"strings"
	"unicode/utf8"
)

// Compare returns -1, 0 or +1 as a is less than, equal to or greater than b
// in the order of Java's String.compareTo (UTF-16 code units) for the
// strings a and b decode to. Bytes that are not valid UTF-8 decode to
// U+FFFD, one per byte, as utf8.DecodeRuneInString reads them; different
// strings that decode alike are ordered by their bytes, so 0 means equal.
//
// It does not allocate. Strings that first differ at an ASCII byte (or
// where one is a byte prefix of the other) cost what a byte comparison
// costs; otherwise the runes from the start are decoded once.
func Compare(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i < n && a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		// An ASCII byte is a whole character in both strings, and the
		// equal bytes before it decode equally.
		return sign(int(a[i]) - int(b[i]))
	}
	if i == len(a) && i == len(b) {
		return 0
	}
	// Decode both from the start: the difference may be inside a
	// multi-byte character, and invalid bytes decode one by one.
	oa, ob := a, b
	for len(a) > 0 && len(b) > 0 {
		ra, wa := utf8.DecodeRuneInString(a)
		rb, wb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ha, la := units(ra)
			hb, lb := units(rb)
			if ha != hb {
				return sign(ha - hb)
			}
			return sign(la - lb) // both supplementary, same high surrogate
		}
		a, b = a[wa:], b[wb:]
	}
	switch {
	case len(a) == len(b):
		// Different strings that decode alike (they differ only in
		// bytes that are not valid UTF-8, each read as U+FFFD): ordered
		// by their bytes, so that the order stays total and a sort's
		// result depends on the ids alone.
		return strings.Compare(oa, ob)
	case len(a) == 0:
		return -1
	}
	return 1
}

// units returns r's UTF-16 code units: r itself and 0 inside the Basic
// Multilingual Plane, else its high and low surrogates.
func units(r rune) (hi, lo int) {
	if r < 0x10000 {
		return int(r), 0
	}
	r -= 0x10000
	return 0xD800 + int(r>>10), 0xDC00 + int(r&0x3FF)
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}
