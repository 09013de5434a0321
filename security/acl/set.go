package acl

import (
	"cmp"
	"maps"
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
		if !indexed(b) {
			continue
		}
		ix := s.types[b.ResourceType]
		if ix == nil {
			ix = &resourceIndex{literal: map[string][]entry{}, prefixed: map[string][]entry{}}
			s.types[b.ResourceType] = ix
		}
		e := entryOf(b)
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

// indexed reports whether Authorize considers b: a concrete resource type
// with a LITERAL or PREFIXED pattern.
func indexed(b Binding) bool {
	return b.ResourceType >= ResourceTopic && b.ResourceType <= ResourceUser &&
		(b.PatternType == PatternLiteral || b.PatternType == PatternPrefixed)
}

func entryOf(b Binding) entry {
	e := entry{principal: b.Principal, host: b.Host, op: b.Operation, perm: b.Permission}
	if a, err := netip.ParseAddr(b.Host); err == nil {
		e.addr = a.Unmap()
	}
	return e
}

// compareEntries is compareBindings for the entries of one resource
// pattern: the order fromSorted lists them in.
func compareEntries(a, b entry) int {
	return cmp.Or(
		cmp.Compare(a.principal, b.principal),
		cmp.Compare(a.host, b.host),
		cmp.Compare(a.op, b.op),
		cmp.Compare(a.perm, b.perm),
	)
}

// sameResource reports whether a and b have the same resource pattern.
func sameResource(a, b Binding) bool {
	return a.ResourceType == b.ResourceType && a.ResourceName == b.ResourceName && a.PatternType == b.PatternType
}

// derive returns a set holding all (sorted and unique): s's index with the
// bindings of changes (sorted, unique; all added, or all removed, with add
// false) added or removed. s is not changed: the index of each resource
// type that changes is copied first (its maps and lengths; the entry lists
// of the names that change are new), the others are shared. A change to
// one binding of a set of n thus costs copying n bindings and one type's
// maps, not sorting and indexing all n again.
func (s *Set) derive(all []Binding, changes []Binding, add bool) *Set {
	n := &Set{all: all, types: s.types}
	var copied, prefixesGone [ResourceUser + 1]bool
	for i := 0; i < len(changes); {
		b := changes[i]
		j := i + 1
		for j < len(changes) && sameResource(changes[j], b) {
			j++
		}
		run := changes[i:j] // one resource pattern: sorted as its entries
		i = j
		if !indexed(b) {
			continue
		}
		rt := b.ResourceType
		if !copied[rt] {
			n.types[rt] = n.types[rt].copy()
			copied[rt] = true
		}
		ix := n.types[rt]
		m := ix.literal
		if b.PatternType == PatternPrefixed {
			m = ix.prefixed
		}
		old, had := m[b.ResourceName]
		var es []entry
		if add {
			es = mergeEntries(old, run)
		} else {
			es = dropEntries(old, run)
		}
		switch {
		case len(es) > 0:
			m[b.ResourceName] = es
		case had:
			delete(m, b.ResourceName)
		}
		if b.PatternType == PatternPrefixed && had != (len(es) > 0) {
			if add {
				l := len(b.ResourceName)
				if k, found := slices.BinarySearch(ix.lengths, l); !found {
					ix.lengths = slices.Insert(ix.lengths, k, l)
				}
			} else {
				prefixesGone[rt] = true
			}
		}
	}
	for rt, ix := range n.types {
		if !copied[rt] {
			continue
		}
		if prefixesGone[rt] {
			ix.lengths = slices.DeleteFunc(ix.lengths, func(l int) bool {
				for p := range ix.prefixed {
					if len(p) == l {
						return false
					}
				}
				return true
			})
		}
		if len(ix.lengths) == 0 {
			ix.lengths = nil
		}
		if len(ix.literal) == 0 && len(ix.prefixed) == 0 {
			n.types[rt] = nil
		}
	}
	return n
}

// copy returns a copy of ix that can be changed without changing ix (an
// empty index for nil). The entry lists are shared: a change replaces a
// name's list, never writes into it.
func (ix *resourceIndex) copy() *resourceIndex {
	if ix == nil {
		return &resourceIndex{literal: map[string][]entry{}, prefixed: map[string][]entry{}}
	}
	return &resourceIndex{literal: maps.Clone(ix.literal), prefixed: maps.Clone(ix.prefixed), lengths: slices.Clone(ix.lengths)}
}

// mergeEntries returns a new list of the entries of es (sorted) and of the
// bindings of run (sorted, none in es).
func mergeEntries(es []entry, run []Binding) []entry {
	out := make([]entry, 0, len(es)+len(run))
	i := 0
	for _, b := range run {
		e := entryOf(b)
		for i < len(es) && compareEntries(es[i], e) < 0 {
			out = append(out, es[i])
			i++
		}
		out = append(out, e)
	}
	return append(out, es[i:]...)
}

// dropEntries returns a new list of the entries of es (sorted) other than
// those of the bindings of run (sorted, all in es); nil if none is left.
func dropEntries(es []entry, run []Binding) []entry {
	if len(run) >= len(es) {
		return nil
	}
	out := make([]entry, 0, len(es)-len(run))
	j := 0
	for _, e := range es {
		if j < len(run) && compareEntries(e, entryOf(run[j])) == 0 {
			j++
			continue
		}
		out = append(out, e)
	}
	return out
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
// nothing new. s is not changed (derive).
func (s *Set) With(bs ...Binding) *Set {
	if s == nil {
		return NewSet(bs)
	}
	var add []Binding
	for _, b := range bs {
		if !s.has(b) {
			add = append(add, b)
		}
	}
	if len(add) == 0 {
		return s
	}
	slices.SortFunc(add, compareBindings)
	add = slices.Compact(add)
	all := make([]Binding, 0, len(s.all)+len(add))
	i := 0
	for _, b := range add {
		for i < len(s.all) && compareBindings(s.all[i], b) < 0 {
			all = append(all, s.all[i])
			i++
		}
		all = append(all, b)
	}
	all = append(all, s.all[i:]...)
	return s.derive(all, add, true)
}

// Without returns the set of s's bindings other than bs; s itself when
// it holds none of bs. s is not changed (derive).
func (s *Set) Without(bs ...Binding) *Set {
	if s == nil {
		return s
	}
	var del []Binding
	for _, b := range bs {
		if s.has(b) {
			del = append(del, b)
		}
	}
	if len(del) == 0 {
		return s
	}
	slices.SortFunc(del, compareBindings)
	del = slices.Compact(del)
	kept := make([]Binding, 0, len(s.all)-len(del))
	j := 0
	for _, b := range s.all {
		if j < len(del) && b == del[j] {
			j++
			continue
		}
		kept = append(kept, b)
	}
	return s.derive(kept, del, false)
}

// has reports whether b is in s.
func (s *Set) has(b Binding) bool {
	_, ok := slices.BinarySearchFunc(s.all, b, compareBindings)
	return ok
}
