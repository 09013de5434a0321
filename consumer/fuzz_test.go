package consumer

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeSubscription checks that arbitrary bytes never panic, that every
// error is ErrMalformed, and that whatever decodes re-encodes and decodes to
// the same value.
func FuzzDecodeSubscription(f *testing.F) {
	for v := int16(0); v <= MaxVersion; v++ {
		b, _ := fullSubscription(v).Encode()
		f.Add(b)
	}
	f.Add(kafkaGoSubscription([]string{"a"}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		s, err := DecodeSubscription(b)
		if !bytes.Equal(orig, b) {
			t.Fatal("input modified")
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		re, err := s.Encode()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", s, err)
		}
		s2, err := DecodeSubscription(re)
		if err != nil {
			t.Fatalf("re-encoded bytes rejected: %v", err)
		}
		re2, _ := s2.Encode()
		if !bytes.Equal(re, re2) {
			t.Fatalf("not stable: %x vs %x", re, re2)
		}
	})
}

// FuzzDecodeAssignment is the same for assignments.
func FuzzDecodeAssignment(f *testing.F) {
	b, _ := Assignment{Version: 1, UserData: []byte{1}}.Encode()
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAssignment(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		re, err := a.Encode()
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", a, err)
		}
		a2, err := DecodeAssignment(re)
		if err != nil {
			t.Fatalf("re-encoded bytes rejected: %v", err)
		}
		re2, _ := a2.Encode()
		if !bytes.Equal(re, re2) {
			t.Fatalf("not stable")
		}
	})
}
