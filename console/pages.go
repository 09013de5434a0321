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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
)

// groupsQuery is the groups page's filter and sort (query parameters, so
// they work from a plain form without scripts).
type groupsQuery struct {
	State, Type, Sort string
	Desc              bool
}

func (q groupsQuery) values() url.Values {
	v := url.Values{}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Type != "" {
		v.Set("type", q.Type)
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
	}
	if q.Desc {
		v.Set("desc", "1")
	}
	return v
}

type groupsPage struct {
	Query         groupsQuery
	Groups        []GroupRow // those shown: at most maxGroupRows
	Matching      int        // of the state and type asked for
	Total         int
	States, Types []string
	// Unreachable are the nodes that could not be reached, whose groups
	// are not listed.
	Unreachable []string
}

// maxGroupRows is the most groups the groups page shows. A page of every
// group of a node with a hundred thousand took seconds and tens of
// megabytes to build and show, and asked the node for every group's
// details; beyond it the page shows the first ones in the order asked for
// and says how to narrow the list (`cohort groups` lists them all).
var maxGroupRows = 1000 // a variable for tests

func (c *Console) groups(ctx context.Context, w http.ResponseWriter, r *http.Request, cl *kgo.Client, d pageData) {
	rows, unreachable, err := listGroups(ctx, cl)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Listing the groups failed: "+err.Error())
		return
	}
	q := r.URL.Query()
	gq := groupsQuery{State: q.Get("state"), Type: q.Get("type"), Sort: q.Get("sort"), Desc: q.Get("desc") == "1"}
	p := groupsPage{Query: gq, Total: len(rows), Unreachable: unreachable,
		// The states cohort groups --state takes: a Dead group is never
		// listed, so ?state=Dead would only ever show none.
		States: group.ListedStates(),
		Types:  []string{"classic", "consumer"}}
	for _, g := range rows {
		if g.State != "" && !slices.Contains(p.States, g.State) {
			p.States = append(p.States, g.State)
		}
	}
	// An unknown state or type would match no group and read as "0 of N
	// groups": it is a 400 naming the accepted values, as the CLI's usage
	// error does. A known one is spelled as listed, so the form shows it.
	for _, f := range []struct {
		name     string
		v        *string
		accepted []string
	}{{"state", &p.Query.State, p.States}, {"type", &p.Query.Type, p.Types}, {"sort", &p.Query.Sort, sortKeys}} {
		if *f.v == "" {
			continue
		}
		i := slices.IndexFunc(f.accepted, func(a string) bool { return strings.EqualFold(a, *f.v) })
		if i < 0 {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Unknown %s %q: want one of %s (any case).", f.name, *f.v, strings.Join(f.accepted, ", ")))
			return
		}
		*f.v = f.accepted[i]
	}
	// Only the groups shown are described, unless the order asked for
	// needs every matching group's details.
	matched := filterRows(rows, p.Query.State, p.Query.Type)
	p.Matching = len(matched)
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

func (c *Console) group(ctx context.Context, w http.ResponseWriter, r *http.Request, cl *kgo.Client, d pageData, id string) {
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
