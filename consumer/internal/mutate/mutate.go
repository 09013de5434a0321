// Package mutate makes damaged copies of encoded bytes for tests that
// compare two decoders on malformed input.
package mutate

import "bytes"

// Variants returns every prefix of b, b with each byte replaced in turn by
// values that break lengths and signs (0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff),
// and b followed by 1, 4 and 5 trailing bytes.
func Variants(b []byte) [][]byte {
	var out [][]byte
	for i := 0; i <= len(b); i++ {
		out = append(out, b[:i:i])
	}
	for i := range b {
		for _, x := range []byte{0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff} {
			c := bytes.Clone(b)
			c[i] = x
			out = append(out, c)
		}
	}
	for _, n := range []int{1, 4, 5} {
		out = append(out, append(bytes.Clone(b), bytes.Repeat([]byte{9}, n)...))
	}
	return out
}
