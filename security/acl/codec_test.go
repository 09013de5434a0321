package acl

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestBinaryRoundTrip(t *testing.T) {
	for _, b := range []Binding{
		{},
		allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "orders"),
		deny("User:CN=a,O=b", "fe80::1", OpAll, ResourceCluster, PatternLiteral, ClusterName),
		{ResourceType: -3, PatternType: 99, Operation: -128, Permission: 127, ResourceName: string(make([]byte, 300)), Principal: "\xff", Host: "h"},
	} {
		data, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Binding
		if err := got.UnmarshalBinary(data); err != nil {
			t.Fatalf("%v: %v", b, err)
		}
		if got != b {
			t.Errorf("round trip of %v gave %v", b, got)
		}
	}
}

// TestBinaryStable pins version 1's layout: stored bindings must decode
// forever.
func TestBinaryStable(t *testing.T) {
	b := allow(alice, "*", OpRead, ResourceTopic, PatternPrefixed, "ord")
	data, _ := b.MarshalBinary()
	want := []byte{1, 2, 4, 3, 3, 3, 'o', 'r', 'd', 10, 'U', 's', 'e', 'r', ':', 'a', 'l', 'i', 'c', 'e', 1, '*'}
	if !bytes.Equal(data, want) {
		t.Errorf("encoding = %v, want %v", data, want)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good, _ := allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "orders").MarshalBinary()
	cases := map[string][]byte{
		"empty":           nil,
		"version 0":       append([]byte{0}, good[1:]...),
		"version 2":       append([]byte{2}, good[1:]...),
		"short header":    good[:4],
		"no strings":      good[:5],
		"truncated":       good[:len(good)-1],
		"trailing":        append(append([]byte{}, good...), 0),
		"length too long": {1, 2, 3, 3, 3, 200, 1, 'x'},
		"huge length":     {1, 2, 3, 3, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"overlong varint": {1, 2, 3, 3, 3, 0x80, 0x00, 0, 0},
	}
	for name, data := range cases {
		b := allow(bob, "*", OpWrite, ResourceGroup, PatternLiteral, "keep")
		if err := b.UnmarshalBinary(data); err == nil {
			t.Errorf("%s: decoded %v", name, b)
		} else if b != allow(bob, "*", OpWrite, ResourceGroup, PatternLiteral, "keep") {
			t.Errorf("%s: failed decode changed the binding", name)
		}
	}
}

func TestKey(t *testing.T) {
	b := allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "orders")
	if got, want := b.Key(), "TOPIC/LITERAL/6:orders/10:User:alice/1:*/READ/ALLOW"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
	// Names that would collide if fields were only joined by separators.
	x := allow("User:a/1:b", "*", OpRead, ResourceTopic, PatternLiteral, "n")
	y := allow("User:a", "*", OpRead, ResourceTopic, PatternLiteral, "n/1:b")
	if x.Key() == y.Key() {
		t.Errorf("distinct bindings share the key %q", x.Key())
	}
	r := rand.New(rand.NewPCG(3, 4))
	keys := map[string]Binding{}
	for range 2000 {
		b := randomBinding(r)
		if prev, ok := keys[b.Key()]; ok && prev != b {
			t.Fatalf("%v and %v share the key %q", prev, b, b.Key())
		}
		keys[b.Key()] = b
	}
}

func FuzzUnmarshalBinary(f *testing.F) {
	for _, b := range []Binding{{}, allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "orders")} {
		data, _ := b.MarshalBinary()
		f.Add(data)
	}
	f.Add([]byte{1, 2, 3, 3, 3, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Binding
		if err := b.UnmarshalBinary(data); err != nil {
			return
		}
		// Decoding is strict, so what decodes re-encodes to the same bytes.
		again, _ := b.MarshalBinary()
		if !bytes.Equal(again, data) {
			t.Fatalf("%x decodes to %v, which encodes to %x", data, b, again)
		}
	})
}
