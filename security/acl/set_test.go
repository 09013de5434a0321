package acl

import (
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestSetCollapsesAndSorts(t *testing.T) {
	b1 := allow(bob, "*", OpRead, ResourceTopic, PatternLiteral, "b")
	b2 := allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "b")
	b3 := allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "a")
	b4 := allow(alice, "*", OpRead, ResourceGroup, PatternLiteral, "a")
	b5 := deny(alice, "*", OpRead, ResourceTopic, PatternPrefixed, "a")
	in := []Binding{b1, b4, b2, b1, b5, b3, b2}
	s := NewSet(in)
	if s.Len() != 5 {
		t.Fatalf("Len = %d, want 5", s.Len())
	}
	want := []Binding{b3, b5, b2, b1, b4} // type, name, pattern type, principal
	if got := s.All(); !sameBindings(got, want) {
		t.Fatalf("All = %v\nwant %v", got, want)
	}
	if in[0] != b1 || in[1] != b4 {
		t.Error("NewSet reordered its argument")
	}
	got := s.All()
	got[0] = b1
	if s.All()[0] != b3 {
		t.Error("mutating All's result changed the set")
	}
}

func TestSetWithWithout(t *testing.T) {
	a := allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, "a")
	b := allow(bob, "*", OpRead, ResourceTopic, PatternPrefixed, "b")
	c := deny(bob, "*", OpWrite, ResourceTopic, PatternLiteral, "c")
	var authz Authorizer

	var empty *Set
	if empty.Len() != 0 || empty.All() != nil || empty.Match(Filter{ResourceType: ResourceAny}) != nil {
		t.Fatal("nil set is not empty")
	}
	if empty.Without(a) != nil {
		t.Error("nil.Without is not the empty set")
	}
	s1 := empty.With(a, b)
	if s1.Len() != 2 {
		t.Fatalf("nil.With(a, b).Len = %d", s1.Len())
	}
	s2 := s1.With(c, a)
	if s2.Len() != 3 || s1.Len() != 2 {
		t.Fatalf("With: new %d, old %d bindings", s2.Len(), s1.Len())
	}
	if s1.With(a) != s1 || s1.With() != s1 {
		t.Error("With of nothing new made a new set")
	}
	if !authz.Authorize(s2, bob, ip1, OpRead, ResourceTopic, "bx") {
		t.Error("With: prefixed binding not applied")
	}
	s3 := s2.Without(b, allow("User:nobody", "*", OpRead, ResourceTopic, PatternLiteral, "z"))
	if got := s3.All(); !sameBindings(got, []Binding{a, c}) {
		t.Fatalf("Without(b) = %v", got)
	}
	if authz.Authorize(s3, bob, ip1, OpRead, ResourceTopic, "bx") {
		t.Error("Without: removed prefixed binding still applies")
	}
	if !authz.Authorize(s2, bob, ip1, OpRead, ResourceTopic, "bx") {
		t.Error("Without changed the original set")
	}
	if s3.Without(b) != s3 {
		t.Error("Without of absent bindings made a new set")
	}
	if s3.Without(a, c).Len() != 0 {
		t.Error("Without of everything is not empty")
	}
}

func TestSetMatchOrder(t *testing.T) {
	var bs []Binding
	for _, name := range []string{"z", "m", "a", "*"} {
		bs = append(bs, allow(alice, "*", OpRead, ResourceTopic, PatternLiteral, name), allow(alice, "*", OpRead, ResourceGroup, PatternLiteral, name))
	}
	s := NewSet(bs)
	got := s.Match(Filter{ResourceType: ResourceTopic, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny})
	names := make([]string, len(got))
	for i, b := range got {
		names[i] = b.ResourceName
	}
	if !slices.Equal(names, []string{"*", "a", "m", "z"}) {
		t.Errorf("Match order = %v", names)
	}
}

// TestSetWithWithoutRandomized: With and Without change a set in place of
// rebuilding it; after every change the set must be exactly (index
// included) the one NewSet builds from the same bindings, and every set
// made before must still be the one it was (sets are values that readers
// keep using while a store publishes the next). Seeded random changes of
// one to a few bindings, over a small universe so that changes collide:
// several resource types, names sharing a pattern, prefixes of equal and
// different lengths, the wildcard, hosts as names and IP addresses, and
// bindings Authorize does not index (a non-concrete type or pattern).
func TestSetWithWithoutRandomized(t *testing.T) {
	types := []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster, ResourceUser, ResourceAny}
	names := []string{"a", "ab", "abc", "b", "bc", Wildcard, "kafka-cluster"}
	patterns := []PatternType{PatternLiteral, PatternPrefixed, PatternPrefixed, PatternMatch}
	principals := []string{alice, bob, "User:*"}
	hosts := []string{"*", ip1, "::ffff:10.0.0.2", "host.example"}
	ops := []Operation{OpRead, OpWrite, OpAll, OpDescribe}
	for seed := range uint64(25) {
		r := rand.New(rand.NewPCG(seed, 1))
		pick := func() Binding {
			b := Binding{ResourceType: types[r.IntN(len(types))], ResourceName: names[r.IntN(len(names))],
				PatternType: patterns[r.IntN(len(patterns))], Principal: principals[r.IntN(len(principals))],
				Host: hosts[r.IntN(len(hosts))], Operation: ops[r.IntN(len(ops))], Permission: PermissionAllow}
			if r.IntN(3) == 0 {
				b.Permission = PermissionDeny
			}
			return b
		}
		type kept struct {
			set  *Set
			want []Binding
		}
		var history []kept
		var s *Set
		in := map[Binding]bool{}
		for step := range 300 {
			bs := make([]Binding, 1+r.IntN(4))
			for i := range bs {
				bs[i] = pick()
				if r.IntN(2) == 0 && s.Len() > 0 { // often one the set holds
					bs[i] = s.all[r.IntN(s.Len())]
				}
			}
			if r.IntN(2) == 0 {
				s = s.With(bs...)
				for _, b := range bs {
					in[b] = true
				}
			} else {
				s = s.Without(bs...)
				for _, b := range bs {
					delete(in, b)
				}
			}
			want := slices.Collect(maps.Keys(in))
			if got, rebuilt := s, NewSet(want); !sameSet(got, rebuilt) {
				t.Fatalf("seed %d step %d: the set changed in place differs from the one built anew:\n%v\n%v", seed, step, got.All(), rebuilt.All())
			}
			history = append(history, kept{s, want})
		}
		for i, k := range history {
			if !sameSet(k.set, NewSet(k.want)) {
				t.Fatalf("seed %d: the set of step %d changed after later changes", seed, i)
			}
		}
	}
}

// sameSet reports whether a and b hold the same bindings with the same
// index (nil is the empty set).
func sameSet(a, b *Set) bool {
	var ta, tb [ResourceUser + 1]*resourceIndex
	if a != nil {
		ta = a.types
	}
	if b != nil {
		tb = b.types
	}
	return sameBindings(a.All(), b.All()) && reflect.DeepEqual(ta, tb)
}
