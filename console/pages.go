package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
)

// groupsQuery is the groups page's filter and sort (query parameters, so
// they work from a plain form without scripts).
type groupsQuery struct {
	State, Type, Sort string
	Desc              bool
	// Search is a part of the group id, case-sensitive as ids are: found
	// anywhere in the id, or at its start with Match "prefix".
	Search, Match string
	// ProtocolType is the protocol type exactly as the group's members
	// gave it ("consumer", "connect", ...).
	ProtocolType string
}

// maxSearchLen bounds the search and the protocol type: a page carries
// them in its form and every link, and nothing longer is needed to tell
// groups apart. It counts as the search box's maxlength does, in UTF-16
// code units (searchLen), so whatever the box lets a person type is
// accepted and no more: at most 3 bytes of UTF-8 a unit, 768 bytes.
const maxSearchLen = 256

// searchLen is the length of s, valid UTF-8, as a browser counts it for
// an input's maxlength: UTF-16 code units, one a character of the Basic
// Multilingual Plane, two one beyond it (an emoji, say).
func searchLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// matchModes are the ways Search matches an id ("" is contains).
var matchModes = []string{"contains", "prefix"}

// filter is what the groups page keeps of the list. In the default order
// (by id, ascending) only the first maxGroupRows are shown, so a node need
// send no more than those; any other order needs every matching group.
func (q groupsQuery) filter() group.ListFilter {
	f := group.ListFilter{State: q.State, Type: q.Type, ProtocolType: q.ProtocolType, ID: q.Search, Prefix: q.Match == "prefix", Limit: -1}
	if q.Sort == "" && !q.Desc {
		f.Limit = int32(maxGroupRows)
	}
	return f
}

func (q groupsQuery) values() url.Values {
	v := url.Values{}
	desc := ""
	if q.Desc {
		desc = "1"
	}
	for _, kv := range [][2]string{{"q", q.Search}, {"match", q.Match}, {"ptype", q.ProtocolType},
		{"state", q.State}, {"type", q.Type}, {"sort", q.Sort}, {"desc", desc}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return v
}

type groupsPage struct {
	Query         groupsQuery
	MaxSearch     int        // the search box's maxlength: maxSearchLen
	Groups        []GroupRow // those shown: at most maxGroupRows
	Matching      int        // of the state and type asked for
	Total         int
	States, Types []string
	// ProtocolTypes are those of the listed groups (at most
	// maxProtocolTypes), for the form.
	ProtocolTypes []string
	// Filtered: the list is narrowed by a filter or a search.
	Filtered bool
	// Unreachable are the nodes that could not be reached, whose groups
	// are not listed.
	Unreachable []string
	// NotAsked are the nodes the console's node names that the page's
	// client did not know, whose groups are not listed.
	NotAsked []string
	// Uncounted names the coordinator partitions (at most
	// maxUncountedNamed of them, then how many more) whose groups no node
	// counted, of Partitions; "" when every partition was counted.
	Uncounted              string
	UncountedN, Partitions int
}

// maxUncountedNamed bounds the partitions the note on uncounted groups
// names one by one.
const maxUncountedNamed = 10

// uncountedText names the partitions ps, the first maxUncountedNamed of
// them and then how many more.
func uncountedText(ps []int32) string {
	var b strings.Builder
	for i, p := range ps[:min(len(ps), maxUncountedNamed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(int(p)))
	}
	if more := len(ps) - maxUncountedNamed; more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	return b.String()
}

// maxGroupRows is the most groups the groups page shows. A page of every
// group of a node with a hundred thousand took seconds and tens of
// megabytes to build and show, and asked the node for every group's
// details; beyond it the page shows the first ones in the order asked for
// and says how to narrow the list (`cohort groups` lists them all).
var maxGroupRows = 1000 // a variable for tests

// maxProtocolTypes bounds the protocol types the form offers: they are
// chosen by clients, and a node could list one per group. Any other can
// still be asked for in the URL (?ptype=).
const maxProtocolTypes = 100

// parseGroupsQuery reads the groups page's query. The search is user input:
// bounded, and refused (a message for a 400 page) before the node is asked
// anything. The message names the parameter, never repeats it.
func parseGroupsQuery(q url.Values) (gq groupsQuery, refused string) {
	gq = groupsQuery{State: q.Get("state"), Type: q.Get("type"), Sort: q.Get("sort"), Desc: q.Get("desc") == "1",
		Search: q.Get("q"), Match: q.Get("match"), ProtocolType: q.Get("ptype")}
	for _, f := range []struct{ name, v string }{{"q", gq.Search}, {"ptype", gq.ProtocolType}} {
		if !utf8.ValidString(f.v) {
			return gq, fmt.Sprintf("The %s parameter is not UTF-8 text (group ids and protocol types are).", f.name)
		}
		if n := searchLen(f.v); n > maxSearchLen {
			return gq, fmt.Sprintf("The %s parameter is %d characters long: at most %d, "+
				"counted as the search box counts them (a character beyond U+FFFF, such as an emoji, counts as two).", f.name, n, maxSearchLen)
		}
	}
	if gq.Match != "" && !slices.Contains(matchModes, gq.Match) {
		return gq, "Unknown match mode: want one of " + strings.Join(matchModes, ", ") + "."
	}
	if gq.Match == "contains" { // the default: links and the form leave it out
		gq.Match = ""
	}
	return gq, ""
}

// pickChoice is v spelled as the accepted value it names in any case, or
// (refused) a message for a 400 page naming the accepted values. An unknown
// state or type would match no group and read as "0 of N groups", so it is
// refused, as the CLI's usage error does. The value is quoted back only
// when it is short: the page need not carry a megabyte of someone's URL.
func pickChoice(name, v string, accepted []string) (spelled, refused string) {
	i := slices.IndexFunc(accepted, func(a string) bool { return strings.EqualFold(a, v) })
	if i >= 0 {
		return accepted[i], ""
	}
	quoted := fmt.Sprintf(" %q", v)
	if len(v) > 64 {
		quoted = fmt.Sprintf(" (%d bytes)", len(v))
	}
	return "", fmt.Sprintf("Unknown %s%s: want one of %s (any case).", name, quoted, strings.Join(accepted, ", "))
}

func (c *Console) groups(ctx context.Context, w http.ResponseWriter, r *http.Request, cl *kgo.Client, d pageData) {
	gq, refused := parseGroupsQuery(r.URL.Query())
	if refused != "" {
		c.fail(w, r, http.StatusBadRequest, refused)
		return
	}
	list, err := listGroups(ctx, cl, gq.filter(), c.partitionOwners())
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Listing the groups failed: "+err.Error())
		return
	}
	p := groupsPage{Query: gq, MaxSearch: maxSearchLen, Total: list.Listed, Unreachable: list.Unreachable, NotAsked: list.NotAsked,
		Partitions: int(list.Partitions),
		// The states cohort groups --state takes: a Dead group is never
		// listed, so ?state=Dead would only ever show none.
		States: group.ListedStates(),
		Types:  []string{"classic", "consumer"}}
	for _, g := range list.Rows {
		if g.State != "" && !slices.Contains(p.States, g.State) {
			p.States = append(p.States, g.State)
		}
	}
	if len(list.Uncounted) > 0 {
		p.Uncounted, p.UncountedN = uncountedText(list.Uncounted), len(list.Uncounted)
	}
	p.ProtocolTypes = list.ProtocolTypes
	if i, found := slices.BinarySearch(p.ProtocolTypes, gq.ProtocolType); gq.ProtocolType != "" && !found {
		// Shown as chosen even if no group has it (or it is not among
		// the first maxProtocolTypes).
		p.ProtocolTypes = slices.Insert(p.ProtocolTypes, i, gq.ProtocolType)
	}
	// A known state, type or order is spelled as listed, so the form
	// shows it; an unknown one is a 400 (pickChoice).
	for _, f := range []struct {
		name     string
		v        *string
		accepted []string
	}{{"state", &p.Query.State, p.States}, {"type", &p.Query.Type, p.Types}, {"sort", &p.Query.Sort, sortKeys}} {
		if *f.v == "" {
			continue
		}
		spelled, refused := pickChoice(f.name, *f.v, f.accepted)
		if refused != "" {
			c.fail(w, r, http.StatusBadRequest, refused)
			return
		}
		*f.v = spelled
	}
	// Only the groups shown are described, unless the order asked for
	// needs every matching group's details.
	matched := list.Rows
	p.Matching = list.Matching
	p.Filtered = p.Query.State != "" || p.Query.Type != "" || p.Query.ProtocolType != "" || p.Query.Search != "" || p.Query.Match != ""
	now := c.now()
	if sortNeedsDescription(p.Query.Sort) {
		if err := describeRows(ctx, cl, matched, now); err != nil {
			c.fail(w, r, http.StatusBadGateway, "Describing the groups failed: "+err.Error())
			return
		}
	}
	sortRows(matched, p.Query.Sort, p.Query.Desc)
	p.Groups = matched[:min(len(matched), maxGroupRows)]
	if !sortNeedsDescription(p.Query.Sort) {
		if err := describeRows(ctx, cl, p.Groups, now); err != nil {
			c.fail(w, r, http.StatusBadGateway, "Describing the groups failed: "+err.Error())
			return
		}
	}
	d.Title, d.Body = "Groups", p
	c.render(w, "groups", http.StatusOK, d)
}

// maxGroupIDBytes is the longest group id the console asks the node about:
// the most bytes a string of Kafka's protocol holds. A longer one cannot be
// sent (the node refuses the request and closes the connection).
const maxGroupIDBytes = 0x7fff

func (c *Console) group(ctx context.Context, w http.ResponseWriter, r *http.Request, cl *kgo.Client, d pageData, id string) {
	if len(id) > maxGroupIDBytes {
		// Said by its length, not repeated: the page need not carry
		// the whole of someone's URL.
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("The group id is %d bytes long: no group has such an id, "+
			"a group id is a Kafka string of at most %d bytes.", len(id), maxGroupIDBytes))
		return
	}
	g, err := describeGroup(ctx, cl, id, c.now())
	switch {
	case errors.Is(err, errForbidden):
		c.fail(w, r, http.StatusForbidden, "You may not describe group "+id+".")
		return
	case errors.Is(err, errTopicsForbidden):
		c.fail(w, r, http.StatusForbidden, "Group "+id+" holds topics you may not describe, so its members and assignment are not shown.")
		return
	case errors.Is(err, errNotFound):
		c.fail(w, r, http.StatusNotFound, "There is no group "+id+".")
		return
	case errors.As(err, new(coordinatorNotKnown)):
		// Not the node's failure: the page's client is behind. A 503,
		// which a reload may mend, not a 502.
		c.fail(w, r, http.StatusServiceUnavailable, "Group "+id+" is not shown: "+err.Error()+
			", and the page's client did not know it yet. Reload the page to show the group.")
		return
	case err != nil && g == nil:
		c.fail(w, r, http.StatusBadGateway, "Describing group "+id+" failed: "+err.Error())
		return
	}
	type page struct {
		G         *GroupDetail
		OffsetErr string
	}
	// The rates of the summary come from every event; the timeline shows
	// the newest ?events=N.
	shown, _ := strconv.Atoi(r.URL.Query().Get("events"))
	g.History.showEvents(shown)
	p := page{G: g}
	if err != nil {
		p.OffsetErr = err.Error()
	}
	d.Title, d.Body = "Group "+id, p
	c.render(w, "group", http.StatusOK, d)
}

func (c *Console) topics(ctx context.Context, w http.ResponseWriter, r *http.Request, cl *kgo.Client, d pageData) {
	ts, err := listTopics(ctx, cl)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Listing the topics failed: "+err.Error())
		return
	}
	d.Title, d.Body = "Topics", ts
	c.render(w, "topics", http.StatusOK, d)
}

// ClusterView is the cluster page: each node and the coordinator
// partitions it owns.
type ClusterView struct {
	Self       int32
	Partitions int
	Nodes      []ClusterNode
	Unowned    []int32
	// NoLease: this node has no valid etcd lease (cut off from etcd, or
	// not registered): it serves nothing, and the view is the last it
	// read, possibly stale.
	NoLease bool
}

// ClusterNode is one node of the cluster page.
type ClusterNode struct {
	ID    int32
	Addr  string
	Owned []int32
	Self  bool
	// Unadvertised says why clients are not sent to the node (its
	// registration gives no usable address; "": they are).
	Unadvertised string
}

// partitionOwners is the node that owns each coordinator partition now, as
// this node sees the cluster; nil outside cluster mode, and while this
// node has no lease (its view is then no longer followed).
func (c *Console) partitionOwners() map[int32]int32 {
	if c.cluster == nil {
		return nil
	}
	cv := c.cluster()
	if cv == nil || cv.NoLease {
		return nil
	}
	owners := map[int32]int32{}
	for _, n := range cv.Nodes {
		for _, p := range n.Owned {
			owners[p] = n.ID
		}
	}
	return owners
}

// clusterOf describes n's cluster (nil unless cluster mode).
func clusterOf(n *node.Node) func() *ClusterView {
	if n.Cluster() == nil {
		return nil
	}
	return func() *ClusterView {
		cl := n.Cluster()
		v := cl.View()
		cv := &ClusterView{Self: v.Self, Partitions: v.Partitions, NoLease: !cl.Serving()}
		byID := map[int32]*ClusterNode{}
		get := func(id int32) *ClusterNode {
			if cn, ok := byID[id]; ok {
				return cn
			}
			cn := &ClusterNode{ID: id, Self: id == v.Self}
			byID[id] = cn
			return cn
		}
		for _, id := range v.Nodes {
			get(id)
		}
		for _, b := range cl.Brokers() {
			get(b.NodeID).Addr = hostPort(b.Host, b.Port)
		}
		for id, why := range cl.Unadvertised() {
			get(id).Unadvertised = why
		}
		for p := int32(0); p < int32(v.Partitions); p++ {
			h, ok := v.Owners[p]
			if !ok {
				cv.Unowned = append(cv.Unowned, p)
				continue
			}
			cn := get(h.Node)
			cn.Owned = append(cn.Owned, p)
		}
		for _, cn := range byID {
			cv.Nodes = append(cv.Nodes, *cn)
		}
		sort.Slice(cv.Nodes, func(i, j int) bool { return cv.Nodes[i].ID < cv.Nodes[j].ID })
		return cv
	}
}
