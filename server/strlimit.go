package server

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxStringLen is the longest string any field of Kafka's protocol may hold:
// non-flexible versions carry a string's length in an int16, and Kafka's
// request readers refuse a longer string in flexible versions too (whose
// compact strings carry a varint length), as an invalid request. cohort does
// the same: a longer string accepted from a flexible request could not be
// written back in a non-flexible response (a group id in ListGroups v2, say),
// where the int16 length would wrap and corrupt the frame for every client
// that asks.
const maxStringLen = 0x7fff

// checkStrings returns an error naming the first string field of req (a
// decoded kmsg request) longer than maxStringLen. Only a flexible request
// whose body exceeds maxStringLen bytes can hold one; callers skip the walk
// for every other request.
func checkStrings(req any) error {
	if c, ok := req.(*kmsg.OffsetCommitRequest); ok && !commitHasLongString(c) {
		// The big request of the hot path, checked without reflection
		// (a long string found falls through to name its field).
		return nil
	}
	v := reflect.ValueOf(req)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	n, path := walkStrings(v)
	if n == 0 {
		return nil
	}
	slices.Reverse(path)
	return fmt.Errorf("%s is a string of %d bytes, more than the protocol's %d",
		strings.Join(append([]string{v.Type().Name()}, path...), "."), n, maxStringLen)
}

// commitHasLongString reports whether any string of c exceeds maxStringLen.
func commitHasLongString(c *kmsg.OffsetCommitRequest) bool {
	long := func(s string) bool { return len(s) > maxStringLen }
	if long(c.Group) || long(c.MemberID) || c.InstanceID != nil && long(*c.InstanceID) {
		return true
	}
	for i := range c.Topics {
		t := &c.Topics[i]
		if long(t.Topic) {
			return true
		}
		for j := range t.Partitions {
			if m := t.Partitions[j].Metadata; m != nil && long(*m) {
				return true
			}
		}
	}
	return false
}

// stringPaths caches, per struct type, the indexes of the fields that are or
// contain strings; the walk visits only those.
var stringPaths sync.Map // reflect.Type -> []stringField

// stringField is a field that is or contains strings: its index and name.
type stringField struct {
	i    int
	name string
}

// holdsString reports whether a value of type t can contain a string.
func holdsString(t reflect.Type, seen map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.String:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsString(t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			return false // recursion: the type's other fields decide
		}
		seen[t] = true
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && holdsString(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

func fieldsWithStrings(t reflect.Type) []stringField {
	if p, ok := stringPaths.Load(t); ok {
		return p.([]stringField)
	}
	var idx []stringField
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && holdsString(f.Type, map[reflect.Type]bool{}) {
			idx = append(idx, stringField{i, f.Name})
		}
	}
	stringPaths.Store(t, idx)
	return idx
}

// walkStrings returns the length of the first string in v longer than
// maxStringLen (0 if none) and the names of the fields leading to it,
// innermost first; nothing is allocated unless one is found.
func walkStrings(v reflect.Value) (int, []string) {
	switch v.Kind() {
	case reflect.String:
		if n := v.Len(); n > maxStringLen {
			return n, nil
		}
	case reflect.Pointer:
		if !v.IsNil() {
			return walkStrings(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if n, path := walkStrings(v.Index(i)); n > 0 {
				return n, path
			}
		}
	case reflect.Struct:
		t := v.Type()
		for _, f := range fieldsWithStrings(t) {
			if n, path := walkStrings(v.Field(f.i)); n > 0 {
				return n, append(path, f.name)
			}
		}
	}
	return 0, nil
}

// cutLongStrings returns resp (a kmsg response) with every string longer
// than maxStringLen cut to fit, at a UTF-8 boundary and ending in "…", and the
// paths of the fields it cut; resp itself when nothing is too long. resp is
// never written to: what it points to may be the coordinator's state, so
// the structs, slices and pointers on the way to a cut string are copied.
// cohort's own strings never need it: requests bring no string over the limit
// (checkStrings), but an error message that quotes one (a group id of 32,767
// bytes in "group … not found") can exceed it. Written as is, such a string
// would wrap its int16 length in a non-flexible response and corrupt the
// frame, and in a flexible one fail Kafka's Java client, which refuses any
// string over the limit. Only a response whose body exceeds maxStringLen can
// hold one; callers skip the walk for every other.
func cutLongStrings(resp kmsg.Response) (kmsg.Response, []string) {
	if j, ok := resp.(*kmsg.JoinGroupResponse); ok && !joinHasLongString(j) {
		// The big answer of a rebalance (the leader's, a member list),
		// checked without reflection: the walk costs as much as
		// encoding it.
		return resp, nil
	}
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return resp, nil
	}
	w := stringCutter{path: []string{v.Elem().Type().Name()}}
	nv, changed := w.walk(v)
	if !changed {
		return resp, nil
	}
	return nv.Interface().(kmsg.Response), w.cut
}

// joinHasLongString reports whether any string of j exceeds maxStringLen.
func joinHasLongString(j *kmsg.JoinGroupResponse) bool {
	long := func(s *string) bool { return s != nil && len(*s) > maxStringLen }
	if long(j.ProtocolType) || long(j.Protocol) || long(&j.LeaderID) || long(&j.MemberID) {
		return true
	}
	for i := range j.Members {
		if m := &j.Members[i]; long(&m.MemberID) || long(m.InstanceID) {
			return true
		}
	}
	return false
}

// stringCutter is cutLongStrings' walk: path holds the names of the fields
// leading to the value being visited, joined only for a string it cuts.
type stringCutter struct {
	path []string
	cut  []string
}

// walk returns v, or a copy of it with its long strings cut (changed).
func (w *stringCutter) walk(v reflect.Value) (reflect.Value, bool) {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); len(s) > maxStringLen {
			w.cut = append(w.cut, fmt.Sprintf("%s (%d bytes)", strings.Join(w.path, "."), len(s)))
			return reflect.ValueOf(shorten(s, maxStringLen)).Convert(v.Type()), true
		}
	case reflect.Pointer:
		if !v.IsNil() {
			if ne, changed := w.walk(v.Elem()); changed {
				p := reflect.New(v.Type().Elem())
				p.Elem().Set(ne)
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		var fields []stringField
		structs := v.Type().Elem().Kind() == reflect.Struct
		if structs {
			// Looked up once for all elements: a JoinGroup or
			// DescribeGroups answer can hold thousands.
			fields = fieldsWithStrings(v.Type().Elem())
		}
		var out reflect.Value
		for i := range v.Len() {
			var ne reflect.Value
			var changed bool
			if structs {
				ne, changed = w.fields(v.Index(i), fields)
			} else {
				ne, changed = w.walk(v.Index(i))
			}
			if !changed {
				continue
			}
			if !out.IsValid() {
				if v.Kind() == reflect.Slice {
					out = reflect.MakeSlice(v.Type(), v.Len(), v.Len())
				} else {
					out = reflect.New(v.Type()).Elem()
				}
				reflect.Copy(out, v)
			}
			out.Index(i).Set(ne)
		}
		if out.IsValid() {
			return out, true
		}
	case reflect.Struct:
		return w.fields(v, fieldsWithStrings(v.Type()))
	}
	return v, false
}

// fields is walk for a struct whose string-holding fields are given.
func (w *stringCutter) fields(v reflect.Value, fields []stringField) (reflect.Value, bool) {
	var out reflect.Value
	for _, f := range fields {
		w.path = append(w.path, f.name)
		nf, changed := w.walk(v.Field(f.i))
		w.path = w.path[:len(w.path)-1]
		if !changed {
			continue
		}
		if !out.IsValid() {
			out = reflect.New(v.Type()).Elem()
			out.Set(v)
		}
		out.Field(f.i).Set(nf)
	}
	if out.IsValid() {
		return out, true
	}
	return v, false
}

// shorten returns s cut to at most n bytes at a rune boundary, its end
// replaced by "…" to show that it was cut.
func shorten(s string, n int) string {
	const mark = "…"
	end := n - len(mark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}
