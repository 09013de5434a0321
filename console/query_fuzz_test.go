package console

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/group"
)

// maxRefusal bounds the message of a 400 page about the query, whatever
// the query holds (up to the megabyte of URL Go's server reads).
const maxRefusal = 400

// FuzzGroupsQuery feeds arbitrary query strings to the groups page's query
// checks, which run before the node is asked anything: nothing may panic;
// a query taken holds a search and a protocol type the page can carry
// (UTF-8, at most maxSearchLen as the box counts) and a known match mode;
// a refused one gets a bounded message that does not repeat the value; and
// a state, type or order is taken only as the accepted value it names.
func FuzzGroupsQuery(f *testing.F) {
	for _, q := range []string{"", "q=orders&match=prefix", "state=stable&type=CONSUMER&sort=rate&desc=1",
		"q=%ff", "ptype=" + strings.Repeat("a", 300), "match=regex", "sort=" + strings.Repeat("z", 70), "q=%F0%9F%98%80&ptype=connect", "sort=nope;x"} {
		f.Add(q)
	}
	choices := []struct {
		name     string
		accepted []string
	}{{"state", group.ListedStates()}, {"type", []string{"classic", "consumer"}}, {"sort", sortKeys}}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw) // as r.URL.Query(): what parses is used
		gq, refused := parseGroupsQuery(q)
		if refused != "" {
			if len(refused) > maxRefusal {
				t.Fatalf("%q refused with %d bytes: %.200q", raw, len(refused), refused)
			}
			for _, v := range []string{gq.Search, gq.ProtocolType, gq.Match} {
				if len(v) >= 8 && strings.Contains(refused, v) {
					t.Fatalf("%q: the refusal repeats %q: %q", raw, v, refused)
				}
			}
			return
		}
		for _, v := range []string{gq.Search, gq.ProtocolType} {
			if !utf8.ValidString(v) || searchLen(v) > maxSearchLen {
				t.Fatalf("%q taken with %q (%d bytes)", raw, v, len(v))
			}
		}
		if gq.Match != "" && gq.Match != "prefix" {
			t.Fatalf("%q taken with match mode %q", raw, gq.Match)
		}
		for _, c := range choices {
			v := q.Get(c.name)
			spelled, refused := pickChoice(c.name, v, c.accepted)
			if refused == "" {
				if !slices.Contains(c.accepted, spelled) || !strings.EqualFold(spelled, v) {
					t.Fatalf("%s %q taken as %q", c.name, v, spelled)
				}
				continue
			}
			if len(refused) > maxRefusal || len(v) > 64 && strings.Contains(refused, v) {
				t.Fatalf("%s %q (%d bytes) refused with %d bytes: %.200q", c.name, v, len(v), len(refused), refused)
			}
		}
	})
}
