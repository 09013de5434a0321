package acl

import (
	"cmp"
	"net/netip"
	"slices"
)

// Set is an immutable set of bindings, indexed for Authorize: by resource
// type, then by literal name and by prefix. Equal bindings collapse into
// one. Sets are values that a store builds and publishes (With, Without
// make new ones); they are safe for concurrent use. A nil *Set is a valid
// empty set.
//
// A Set keeps whatever bindings it is given, and filters match them all;
// Authorize considers only those of a concrete resource type with a
// LITERAL or PREFIXED pattern. Stores should admit only bindings that
// pass Validate.
type Set struct {
	all   []Binding                        // sorted by compareBindings, unique
	types [ResourceUser + 1]*resourceIndex // by resource type
}

// resourceIndex holds the bindings of one resource type.
type resourceIndex struct {
	literal  map[string][]entry // by resource name, "*" included
	prefixed map[string][]entry // by prefix
	lengths  []int              // the distinct lengths of the prefixes, ascending
}

// entry is what Authorize needs of a binding once its resource matched.
type entry struct {
	principal string
	host      string
	addr      netip.Addr // host as an IP address, when it is one
	op        Operation
	perm      Permission
}

// NewSet returns the set of bs (bs is not kept).
func NewSet(bs []Binding) *Set {
	all := slices.Clone(bs)
	slices.SortFunc(all, compareBindings)
	return fromSorted(slices.Compact(all))
}

// compareBindings orders bindings by resource (type, name, pattern type),
// then principal, host, operation and permission: All, Match and the
// admin APIs list bindings grouped by resource, deterministically.
func compareBindings(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// fromSorted indexes all, which is sorted and unique, and keeps it.
func fromSorted(all []Binding) *Set {
	s := &Set{all: all}
	for _, b := range all {
		if b.ResourceType < ResourceTopic || b.ResourceType > ResourceUser {
			continue
		}
		ix := s.types[b.ResourceType]
		if ix == nil {
			ix = &resourceIndex{literal: map[string][]entry{}, prefixed: map[string][]entry{}}
			s.types[b.ResourceType] = ix
		}
		e := entry{principal: b.Principal, host: b.Host, op: b.Operation, perm: b.Permission}
		if a, err := netip.ParseAddr(b.Host); err == nil {
			e.addr = a.Unmap()
		}
		switch b.PatternType {
		case PatternLiteral:
			ix.literal[b.ResourceName] = append(ix.literal[b.ResourceName], e)
		case PatternPrefixed:
			if _, ok := ix.prefixed[b.ResourceName]; !ok {
				ix.lengths = append(ix.lengths, len(b.ResourceName))
			}
			ix.prefixed[b.ResourceName] = append(ix.prefixed[b.ResourceName], e)
		}
	}
	for _, ix := range s.types {
		if ix != nil {
			slices.Sort(ix.lengths)
			ix.lengths = slices.Compact(ix.lengths)
		}
	}
	return s
}

// Len is the number of bindings in s.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// All returns a copy of the bindings of s, in order of resource type,
// resource name, pattern type, principal, host, operation, permission.
func (s *Set) All() []Binding {
	if s == nil {
		return nil
	}
	return slices.Clone(s.all)
}

// Match returns the bindings f selects (Filter.Matches), in the order of
// All; nil if none.
func (s *Set) Match(f Filter) []Binding {
	if s == nil {
		return nil
	}
	var out []Binding
	for _, b := range s.all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// With returns the set of s's bindings and bs; s itself when bs adds
// nothing new.
func (s *Set) With(bs ...Binding) *Set {
	if s == nil {
		return NewSet(bs)
	}
	if !slices.ContainsFunc(bs, func(b Binding) bool { return !s.has(b) }) {
		return s
	}
	all := make([]Binding, 0, len(s.all)+len(bs))
	return NewSet(append(append(all, s.all...), bs...))
}

// Without returns the set of s's bindings other than bs; s itself when
// it holds none of bs.
func (s *Set) Without(bs ...Binding) *Set {
	if s == nil || !slices.ContainsFunc(bs, s.has) {
		return s
	}
	drop := make(map[Binding]struct{}, len(bs))
	for _, b := range bs {
		drop[b] = struct{}{}
	}
	kept := make([]Binding, 0, len(s.all))
	for _, b := range s.all {
		if _, ok := drop[b]; !ok {
			kept = append(kept, b)
		}
	}
	return fromSorted(kept)
}

// has reports whether b is in s.
func (s *Set) has(b Binding) bool {
	_, ok := slices.BinarySearchFunc(s.all, b, compareBindings)
	return ok
}
