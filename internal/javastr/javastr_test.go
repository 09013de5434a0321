package javastr

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
)

// reference is Java's String.compareTo spelled out: encode both to UTF-16
// (invalid bytes as U+FFFD) and compare the code units; different strings
// that encode alike are ordered by their bytes (Compare keeps the order
// total).
func reference(a, b string) int {
	x, y := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(x) && i < len(y); i++ {
		if x[i] != y[i] {
			return sign(int(x[i]) - int(y[i]))
		}
	}
	if len(x) == len(y) {
		return strings.Compare(a, b)
	}
	return sign(len(x) - len(y))
}

func TestCompareUTF16Order(t *testing.T) {
	// Kafka orders the emoji (surrogates 0xD83D 0xDE00) before the
	// fullwidth A (0xFF21); byte order says the opposite.
	if got := Compare("\U0001F600", "\uFF21"); got != -1 {
		t.Errorf("Compare(😀, Ａ) = %d, want -1", got)
	}
	if got := Compare("x\uFF21", "x\U0001F600"); got != 1 {
		t.Errorf("Compare(xＡ, x😀) = %d, want 1", got)
	}
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "a", -1}, {"a", "", 1}, {"a", "b", -1}, {"ab", "a", 1},
		{"é", "e", 1}, {"\U0001F600", "\U0001F601", -1}, {"\U00010000", "\U0010FFFF", -1},
		{"\uE000", "\U00010000", 1}, {"\uD7FF", "\U00010000", -1}, {"\xff", "\uFFFD", 1}, // decoded alike: by bytes
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestCompareMatchesReference: seeded random strings drawn from characters
// around the boundaries where byte and UTF-16 order disagree, plus invalid
// bytes and shared prefixes.
func TestCompareMatchesReference(t *testing.T) {
	alphabet := []string{"a", "b", "~", "\u00e9", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uff21", "\uffff",
		"\U00010000", "\U0001F600", "\U0001F601", "\U0010FFFF", "\xff", "\xe2\x82", "\x80"}
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var sb strings.Builder
		for range r.IntN(5) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return sb.String()
	}
	for range 200000 {
		p := gen()
		a, b := p+gen(), p+gen()
		// Invalid bytes: []rune conversion and DecodeRuneInString agree
		// (one U+FFFD per byte), so the reference applies to them too.
		if got, want := Compare(a, b), reference(a, b); got != want {
			t.Fatalf("Compare(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

func TestCompareASCIIDoesNotAllocate(t *testing.T) {
	a, b := "consumer-1-6f1c0e55-2a4b-4a8e-9d7c-000000000001", "consumer-1-6f1c0e55-2a4b-4a8e-9d7c-000000000002"
	u, v := "instance-\U0001F600", "instance-\uFF21"
	if n := testing.AllocsPerRun(100, func() { _ = Compare(a, b) + Compare(u, v) }); n != 0 {
		t.Errorf("Compare allocates %v times per call", n)
	}
}

// TestDifferentStringsNeverEqual: strings that differ only in bytes that are
// not valid UTF-8 decode alike but are not equal: Compare orders them by
// their bytes (a tie made the member order depend on the input's order).
func TestDifferentStringsNeverEqual(t *testing.T) {
	for _, p := range [][2]string{{"m-\x80", "m-\x81"}, {"\xff", "\xfe"}, {"a\x80b", "a\uFFFDb"}} {
		x, y := Compare(p[0], p[1]), Compare(p[1], p[0])
		if x == 0 || x != -y || x != strings.Compare(p[0], p[1]) {
			t.Errorf("Compare(%q, %q) = %d, reversed %d", p[0], p[1], x, y)
		}
	}
}
