package testbed

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
)

// Bare is a cohort node that stock clients use directly, with no router
// and no data cluster: cohort answers the data-plane requests of its catalog
// topics itself (empty partitions). The node's Tap feeds a Journal, so the
// router's checks apply unchanged, and counts every Fetch; the node's
// warnings and errors are kept.
type Bare struct {
	Node    *node.Node
	Journal *Journal

	mu       sync.Mutex
	fetches  []FetchRequest
	requests map[string]map[int16]int // client id → API key → answered requests
	warns    []string
	also     []func(server.Client, kmsg.Request, kmsg.Response)
}

// FetchRequest is one Fetch the node answered.
type FetchRequest struct {
	At       time.Time // when the answer was written (after the hold)
	ClientID string
	MaxWait  time.Duration
	TPs      []TP // the partitions fetched
}

// StartBare starts an in-process node on 127.0.0.1:0 (memory store, no
// initial rebalance delay, 1 s minimum session timeout) with the catalog
// topics given (name → partitions), closed at cleanup.
func StartBare(t testing.TB, topics map[string]int32) *Bare {
	t.Helper()
	return StartBareTuned(t, topics, nil)
}

// StartBareTuned is StartBare with tune applied to the node's group
// settings (e.g. the consumer protocol's session timeout and heartbeat
// interval).
func StartBareTuned(t testing.TB, topics map[string]int32, tune func(*group.Config)) *Bare {
	t.Helper()
	b := &Bare{Journal: NewJournal(), requests: map[string]map[int16]int{}}
	n := startNode(t, node.Config{
		ClusterID: "cohort-bare",
		Logger:    slog.New(slog.NewTextHandler(warnLog{t, b}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Tap:       b.tap,
	}, time.Second, tune)
	b.Node = n
	for name, parts := range topics {
		if _, err := n.Catalog().Create(name, parts, nil); err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
	}
	return b
}

// Addr is the node's address, the bootstrap address for clients.
func (b *Bare) Addr() string { return b.Node.Addr() }

// OnAnswered adds f to what sees every request the node answers (after the
// journal), e.g. to keep a field the journal does not.
func (b *Bare) OnAnswered(f func(c server.Client, req kmsg.Request, resp kmsg.Response)) {
	b.mu.Lock()
	b.also = append(b.also, f)
	b.mu.Unlock()
}

func (b *Bare) tap(c server.Client, req kmsg.Request, resp kmsg.Response) {
	b.Journal.Tap(c, req, resp)
	b.mu.Lock()
	if b.requests[c.ID] == nil {
		b.requests[c.ID] = map[int16]int{}
	}
	b.requests[c.ID][req.Key()]++
	also := b.also
	b.mu.Unlock()
	for _, f := range also {
		f(c, req, resp)
	}
	q, ok := req.(*kmsg.FetchRequest)
	if !ok {
		return
	}
	f := FetchRequest{At: time.Now(), ClientID: c.ID, MaxWait: time.Duration(q.MaxWaitMillis) * time.Millisecond}
	for _, t := range q.Topics {
		name := t.Topic
		if q.Version >= 13 {
			if ct, ok := b.Node.Catalog().LookupID(t.TopicID); ok {
				name = ct.Name
			}
		}
		for _, p := range t.Partitions {
			f.TPs = append(f.TPs, TP{name, p.Partition})
		}
	}
	b.mu.Lock()
	b.fetches = append(b.fetches, f)
	b.mu.Unlock()
}

// Fetches returns the Fetch requests answered in [from, to).
func (b *Bare) Fetches(from, to time.Time) []FetchRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []FetchRequest
	for _, f := range b.fetches {
		if !f.At.Before(from) && f.At.Before(to) {
			out = append(out, f)
		}
	}
	return out
}

// Requests returns how many requests of API key the node answered to the
// client with this client id.
func (b *Bare) Requests(clientID string, key int16) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests[clientID][key]
}

// Warnings returns what the node logged at warn level and above.
func (b *Bare) Warnings() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.warns)
}

// warnLog keeps the node's log lines (warn and above) and shows them in the
// test log.
type warnLog struct {
	t testing.TB
	b *Bare
}

func (w warnLog) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	w.b.mu.Lock()
	w.b.warns = append(w.b.warns, line)
	w.b.mu.Unlock()
	w.t.Log("cohort: " + line)
	return len(p), nil
}
