package server

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

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
var stringPaths sync.Map // reflect.Type -> []int

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

func fieldsWithStrings(t reflect.Type) []int {
	if p, ok := stringPaths.Load(t); ok {
		return p.([]int)
	}
	var idx []int
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && holdsString(f.Type, map[reflect.Type]bool{}) {
			idx = append(idx, i)
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
		for _, i := range fieldsWithStrings(t) {
			if n, path := walkStrings(v.Field(i)); n > 0 {
				return n, append(path, t.Field(i).Name)
			}
		}
	}
	return 0, nil
}
