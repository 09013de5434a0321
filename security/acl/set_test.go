package acl

import (
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
