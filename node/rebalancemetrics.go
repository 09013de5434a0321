package node

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/logburst"
)

// rebalanceCauses are the causes with a series from the start; any other
// counts as "other".
var rebalanceCauses = []group.CauseKind{group.CauseMemberJoined, group.CauseMetadataChanged,
	group.CauseSubscriptionChanged, group.CauseMemberLeft, group.CauseSessionTimeout, group.CauseRebalanceTimeout,
	group.CauseSyncTimeout, group.CauseLeaderNotSynced, group.CauseStaticReplaced, group.CauseAdmin,
	group.CauseLoaded, group.CauseTopicsChanged, group.CauseOther}

// memberTimeouts are the causes that are a member removed for a timeout:
// cohort_group_member_timeouts_total counts them.
var memberTimeouts = []group.CauseKind{group.CauseSessionTimeout, group.CauseRebalanceTimeout,
	group.CauseSyncTimeout, group.CauseLeaderNotSynced}

type rebalanceKey struct {
	typ   string
	cause group.CauseKind
}

// rebalanceMetrics count the rebalances the groups report (group.Config
// OnRebalance, OnStorm): by type and cause, with their phase durations.
// Children are resolved up front: the callback runs under a partition's
// lock.
type rebalanceMetrics struct {
	count      map[rebalanceKey]prometheus.Counter
	timeouts   map[rebalanceKey]prometheus.Counter // by type and timeout cause
	join, sync map[string]prometheus.Observer
	storms     prometheus.Counter

	// flagged are the groups flagged as storming now (OnStorm): the gauge
	// cohort_groups_storming.
	mu      sync.Mutex
	flagged map[string]bool
	parts   func() int // the coordinator's partition count
}

// newRebalanceMetrics registers the metrics; parts tells the number of
// coordinator partitions (called only once partitions are released).
func newRebalanceMetrics(reg prometheus.Registerer, parts func() int) *rebalanceMetrics {
	count := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Name: "rebalances_total",
		Help: "Rebalances completed (or ended) by groups this node coordinates, by group type and the cause that started them.",
	}, []string{"type", "cause"})
	timeouts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cohort", Name: "group_member_timeouts_total",
		Help: "Members the coordinator removed for a timeout, by group type and timeout, whether the removal started a rebalance or came during one.",
	}, []string{"type", "timeout"})
	buckets := prometheus.ExponentialBuckets(1e-3, 4, 10) // 1ms .. 262s
	join := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "cohort", Name: "rebalance_join_duration_seconds",
		Help:    "Join phase of each rebalance (classic: the join barrier; consumer: until the target assignment was computed), by group type.",
		Buckets: buckets,
	}, []string{"type"})
	sync := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "cohort", Name: "rebalance_sync_duration_seconds",
		Help:    "Sync phase of each rebalance (classic: until the assignment was stored; consumer: until every member converged), by group type.",
		Buckets: buckets,
	}, []string{"type"})
	storms := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "cohort", Name: "rebalance_storms_total",
		Help: "Times a group was flagged as rebalancing too often (--rebalance-storm); a flag found again when the group's partition loads (a restart, a move) is not counted again.",
	})
	m := &rebalanceMetrics{count: map[rebalanceKey]prometheus.Counter{}, timeouts: map[rebalanceKey]prometheus.Counter{}, join: map[string]prometheus.Observer{},
		sync: map[string]prometheus.Observer{}, storms: storms, flagged: map[string]bool{}, parts: parts}
	storming := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "cohort", Name: "groups_storming",
		Help: "Groups this node coordinates that are flagged now as rebalancing too often (--rebalance-storm).",
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return float64(len(m.flagged))
	})
	reg.MustRegister(count, timeouts, join, sync, storms, storming)
	for _, typ := range []string{"classic", "consumer"} {
		for _, c := range rebalanceCauses {
			m.count[rebalanceKey{typ, c}] = count.WithLabelValues(typ, string(c))
		}
		for _, c := range memberTimeouts {
			m.timeouts[rebalanceKey{typ, c}] = timeouts.WithLabelValues(typ, string(c))
		}
		m.join[typ] = join.WithLabelValues(typ)
		m.sync[typ] = sync.WithLabelValues(typ)
	}
	return m
}

func (m *rebalanceMetrics) observe(ev group.RebalanceEvent) {
	typ := "classic"
	if ev.Type == "consumer" {
		typ = "consumer"
	}
	c, ok := m.count[rebalanceKey{typ, ev.Cause.Kind}]
	if !ok {
		c = m.count[rebalanceKey{typ, group.CauseOther}]
	}
	c.Inc()
	// Members removed for a timeout: the cause, and every more cause (a
	// slow member evicted at the join barrier of a rebalance that a join
	// started is one of those, which the count above never sees).
	if c, ok := m.timeouts[rebalanceKey{typ, ev.Cause.Kind}]; ok {
		c.Inc()
	}
	for _, mc := range ev.MoreCauses {
		if c, ok := m.timeouts[rebalanceKey{typ, mc.Kind}]; ok {
			c.Inc()
		}
	}
	// And those past the 64 more causes an event keeps (a rebalance in
	// which hundreds of members timed out at once).
	for kind, n := range ev.CutCauses {
		if c, ok := m.timeouts[rebalanceKey{typ, kind}]; ok {
			c.Add(float64(n))
		}
	}
	m.join[typ].Observe((time.Duration(ev.JoinMs) * time.Millisecond).Seconds())
	m.sync[typ].Observe((time.Duration(ev.SyncMs) * time.Millisecond).Seconds())
}

func (m *rebalanceMetrics) storm(st group.StormStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st.Late {
		// Flagged by a rebalance stored after its partition's state left
		// this node (a move, or the node stopping): counted by no node
		// else (the next owner finds the flag at its load), and not
		// served here, so not in the gauge.
		if st.Flagged {
			m.storms.Inc()
		}
		return
	}
	if !st.Flagged {
		delete(m.flagged, st.Group)
		return
	}
	if !m.flagged[st.Group] && !st.Loaded {
		// A flag found at the load of the group's partition is a storm
		// counted before (by this node, or the one that served the
		// partition): summed over the nodes, or over a restart, it would
		// count once more at every move.
		m.storms.Inc()
	}
	m.flagged[st.Group] = true
}

// released forgets the storm flags of the groups of coordinator partition
// p, whose state this node dropped (Node.partitionUnloaded): the shard that
// loads it next, here or on another node, flags them anew if they still
// storm.
func (m *rebalanceMetrics) released(p int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.flagged) == 0 {
		return
	}
	n := m.parts()
	for g := range m.flagged {
		if coordinator.PartitionFor(g, n) == p {
			delete(m.flagged, g)
		}
	}
}

// hook adds the metrics to cfg's callbacks, keeping any already set.
func (m *rebalanceMetrics) hook(cfg *group.Config) {
	if prev := cfg.OnRebalance; prev != nil {
		cfg.OnRebalance = func(ev group.RebalanceEvent) { prev(ev); m.observe(ev) }
	} else {
		cfg.OnRebalance = m.observe
	}
	if prev := cfg.OnStorm; prev != nil {
		cfg.OnStorm = func(st group.StormStatus) { prev(st); m.storm(st) }
	} else {
		cfg.OnStorm = m.storm
	}
}

// logStorms adds to cfg's OnStorm (keeping any already set) a log line when
// a group is flagged as storming (WARN, with the count, the window and the
// causes) and when it no longer is (INFO): the metric tells that some group
// storms, the line which one, for an operator reading the log. At most
// logburst.Max lines a logburst.Window over all groups (on clk): a client can
// make group after group storm (a member joining and leaving each group
// eleven times does it at the default threshold), a line for each, and
// one more as each group's window clears; the next line logged says
// how many were left out, and cohort_rebalance_storms_total and the
// console still count and mark every one.
func logStorms(cfg *group.Config, log *slog.Logger, clk clock.Clock) {
	if clk == nil {
		clk = clock.Real{}
	}
	prev := cfg.OnStorm
	var lim logburst.Limiter
	cfg.OnStorm = func(st group.StormStatus) {
		if prev != nil {
			prev(st)
		}
		ok, skipped := lim.Allow(clk.Now())
		if !ok {
			return
		}
		var attrs []any
		if skipped > 0 {
			attrs = []any{"unlogged_before", skipped}
		}
		if !st.Flagged {
			log.Info("group no longer rebalancing in a storm", append([]any{"group", st.Group}, attrs...)...)
			return
		}
		causes := make([]string, 0, len(st.Causes))
		for k, n := range st.Causes {
			causes = append(causes, fmt.Sprintf("%s=%d", k, n))
		}
		slices.Sort(causes)
		attrs = append([]any{"group", st.Group, "rebalances", st.Count, "threshold", st.Threshold,
			"window", time.Duration(st.WindowMs) * time.Millisecond, "causes", strings.Join(causes, ",")}, attrs...)
		if st.Loaded {
			attrs = append(attrs, "loaded", true) // flagged before its partition loaded here
		}
		if st.Late {
			attrs = append(attrs, "unloaded", true) // by a write stored after its partition left this node
		}
		log.Warn("group rebalancing in a storm (see cohort group why)", attrs...)
	}
}
