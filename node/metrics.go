package node

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/internal/buildinfo"
)

// groupStates are the states reported for each group type, so that every
// series of cohort_groups exists (at 0) from the first scrape.
var groupStates = []struct {
	typ    string
	states []string
}{
	{"classic", []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}},
	{"consumer", []string{"Empty", "Assigning", "Reconciling", "Stable"}},
}

// nodeCollector computes the gauges that describe the node's state at
// scrape time, from the coordinator (groups, members, partitions) and, in
// cluster mode, the cluster membership (lease, nodes, partitions served):
// nothing is counted on the request path.
type nodeCollector struct {
	n *Node

	groups, members, owned, loading *prometheus.Desc
	ready                           *prometheus.Desc
	leaseValid, leaseSessions       *prometheus.Desc
	clusterNodes, unadvertised      *prometheus.Desc
	certExpiry                      *prometheus.Desc
}

func newNodeCollector(n *Node) *nodeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &nodeCollector{
		n:       n,
		groups:  d("cohort_groups", "Groups this node coordinates, by type (classic, consumer) and state.", "type", "state"),
		members: d("cohort_group_members", "Members of the groups this node coordinates, by group type.", "type"),
		owned:   d("cohort_coordinator_partitions_owned", "Coordinator partitions this node serves or is loading."),
		loading: d("cohort_coordinator_partitions_loading", "Coordinator partitions this node is loading (answering COORDINATOR_LOAD_IN_PROGRESS)."),
		ready:   d("cohort_ready", "1 while /readyz answers 200 (the node serves every coordinator partition it owns), 0 while it answers 503."),
		leaseValid: d("cohort_cluster_lease_valid",
			"Cluster mode: 1 while this node holds a valid etcd lease by its own clock (it serves its partitions), 0 otherwise."),
		leaseSessions: d("cohort_cluster_lease_sessions_total",
			"Cluster mode: etcd leases this node was granted (one per session; each one after the first follows a lost lease)."),
		clusterNodes: d("cohort_cluster_nodes", "Cluster mode: live nodes registered in etcd, this one included."),
		unadvertised: d("cohort_cluster_nodes_unadvertised",
			"Cluster mode: live nodes whose registration in etcd gives clients no usable address (unreadable, empty or wildcard host, port outside 1-65535): left out of Metadata, their groups answer COORDINATOR_NOT_AVAILABLE."),
		certExpiry: d("cohort_tls_certificate_expiry_timestamp_seconds",
			"When the certificate this node presents expires (its NotAfter, Unix seconds): listeners (SSL, SASL_SSL, HTTPS) and etcd (its client certificate); the one in use, the last that loaded.", "certificate"),
	}
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.groups
	ch <- c.members
	ch <- c.owned
	ch <- c.loading
	ch <- c.ready
	if c.n.cl != nil {
		ch <- c.leaseValid
		ch <- c.leaseSessions
		ch <- c.clusterNodes
		ch <- c.unadvertised
	}
	ch <- c.certExpiry
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ typ, state string }
	counts := map[key]int{}
	members := map[string]int{}
	c.n.coord.GroupStats(func(typ, state string, m int) {
		counts[key{typ, state}]++
		members[typ] += m
	})
	for _, g := range groupStates {
		for _, s := range g.states {
			ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(counts[key{g.typ, s}]), g.typ, s)
			delete(counts, key{g.typ, s})
		}
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(members[g.typ]), g.typ)
	}
	for k, v := range counts { // a state not listed above
		ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(v), k.typ, k.state)
	}
	owned, loading := 0, 0
	for _, st := range c.n.coord.PartitionStates(nil) {
		switch st {
		case coordinator.PartitionLoading:
			loading++
			owned++
		case coordinator.PartitionActive:
			owned++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, float64(owned))
	ch <- prometheus.MustNewConstMetric(c.loading, prometheus.GaugeValue, float64(loading))
	ready := 0.0
	if ok, _ := c.n.Ready(); ok {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready)
	if cl := c.n.cl; cl != nil {
		valid := 0.0
		if cl.c.Serving() {
			valid = 1
		}
		ch <- prometheus.MustNewConstMetric(c.leaseValid, prometheus.GaugeValue, valid)
		ch <- prometheus.MustNewConstMetric(c.leaseSessions, prometheus.CounterValue, float64(cl.c.Sessions()))
		ch <- prometheus.MustNewConstMetric(c.clusterNodes, prometheus.GaugeValue, float64(cl.c.NodeCount()))
		ch <- prometheus.MustNewConstMetric(c.unadvertised, prometheus.GaugeValue, float64(len(cl.c.Unadvertised())))
	}
	for name, cert := range c.n.certificates() {
		if l := leaf(cert); l != nil {
			ch <- prometheus.MustNewConstMetric(c.certExpiry, prometheus.GaugeValue, float64(l.NotAfter.Unix()), name)
		}
	}
}

// clusterMetrics count the partitions the cluster hands to and takes from
// this node's coordinator.
type clusterMetrics struct {
	acquired, released prometheus.Counter
	// compactions counts this node's turns at compacting etcd's history
	// (etcdstore.Compactor), by result.
	compactions *prometheus.CounterVec
	// securitySynced and securityFailures follow the watch that keeps the
	// node's users and ACLs in step with etcd (authstate.Watch).
	securitySynced   prometheus.Gauge
	securityFailures prometheus.Counter
}

// securitySync is authstate.Watch's observer: nil once the node's users
// and ACLs are read again and watched, an error when that fails or the
// watch breaks.
func (m *clusterMetrics) securitySync(err error) {
	if err != nil {
		m.securitySynced.Set(0)
		m.securityFailures.Inc()
		return
	}
	m.securitySynced.Set(1)
}

// compactionResults are the results compactions counts, each exported from
// the first scrape.
var compactionResults = []string{"compacted", "failed", "denied"}

func newClusterMetrics(reg prometheus.Registerer) *clusterMetrics {
	m := &clusterMetrics{
		acquired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cohort", Subsystem: "cluster", Name: "partitions_acquired_total",
			Help: "Cluster mode: coordinator partitions this node took over (each then loads).",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cohort", Subsystem: "cluster", Name: "partitions_released_total",
			Help: "Cluster mode: coordinator partitions this node stopped serving (handed over to another node, or dropped when its lease was lost or it closed).",
		}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cohort", Subsystem: "cluster", Name: "etcd_compactions_total",
			Help: "Cluster mode: this node's compactions of etcd's history (--etcd-compaction-interval), by result: compacted; failed (etcd's history keeps growing until one succeeds); denied (etcd lets only root compact: etcd must compact by itself).",
		}, []string{"result"}),
		securitySynced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "cohort", Subsystem: "cluster", Name: "security_synced",
			Help: "Cluster mode: 1 while this node's users and ACLs follow etcd (read and watched), 0 until the first read and while reading or watching them fails (the node keeps the users and ACLs it read last, retrying every second); a connection to etcd that is only lost may leave it at 1 (see cohort_cluster_lease_valid).",
		}),
		securityFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cohort", Subsystem: "cluster", Name: "security_sync_failures_total",
			Help: "Cluster mode: times reading or watching the users and ACLs in etcd failed (each is logged and retried a second later).",
		}),
	}
	reg.MustRegister(m.acquired, m.released, m.compactions, m.securitySynced, m.securityFailures)
	for _, r := range compactionResults {
		m.compactions.WithLabelValues(r)
	}
	return m
}

// observedPartitions is the coordinator as the cluster drives it, counting
// hand-overs.
type observedPartitions struct {
	c *coordinator.Coordinator
	m *clusterMetrics
}

func (o observedPartitions) Acquire(p int32) {
	o.m.acquired.Inc()
	o.c.Acquire(p)
}

func (o observedPartitions) Release(p int32) {
	o.m.released.Inc()
	o.c.Release(p)
}

// partitionUnloaded is the coordinator's OnUnload: the storm flags of
// partition p's groups are dropped whenever the partition's state is,
// whether it leaves the node (cluster mode) or is loaded again from the
// store (after a failed write or a panic of the shard); the shard that
// loads it flags again the groups that still storm, without counting
// them again (group.StormStatus.Loaded).
func (n *Node) partitionUnloaded(p int32) {
	if n.rm != nil {
		n.rm.released(p)
	}
}

// newRegistry returns the node's registry with the Go runtime and process
// collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(buildInfoGauge())
	return reg
}

// buildInfoGauge is cohort_build_info, always 1: which cohort this node
// runs, as labels, so that a dashboard sees every node's version and a
// mixed-version cluster during an upgrade stands out.
func buildInfoGauge() prometheus.Gauge {
	version, revision, _ := buildinfo.Info()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "cohort_build_info",
		Help:        "Always 1; its labels are the cohort version, the VCS revision it was built from and the Go version that built it.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
