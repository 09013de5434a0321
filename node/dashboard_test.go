package node

import (
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
	"github.com/cohort-dev/cohort/store/memstore"
)

// dashboardQueries returns every PromQL query of the Grafana dashboard: the
// panels' expr fields and the template variables' queries.
func dashboardQueries(t *testing.T, v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "expr" || k == "definition") {
				out = append(out, s)
			}
			out = append(out, dashboardQueries(t, e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, dashboardQueries(t, e)...)
		}
	}
	return out
}

// TestGrafanaDashboard parses docs/grafana-dashboard.json and checks that
// every metric its queries use is one a node exports: alone (after one
// request answered with an error, so that the error family has a series)
// or in cluster mode.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	queries := dashboardQueries(t, dash)
	if len(queries) < 10 {
		t.Fatalf("%d queries in the dashboard", len(queries))
	}

	exported := map[string]string{} // name -> type
	add := func(s scrape) {
		for name, mf := range s {
			exported[name] = mf.GetType().String()
		}
	}
	n := metricsNode(t, memstore.New())
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "nobody", "nobody"
	if _, err := hb.RequestWith(t.Context(), client(t, n.Addr())); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, n.HTTPAddr(), 5*time.Second, above(0), "cohort_server_request_errors_total")
	add(scrapeMetrics(t, n.HTTPAddr()))

	// A node with a SASL listener: the families by SASL mechanism.
	scfg := secureConfig(t, memstore.New())
	scfg.HTTPListen = "127.0.0.1:0"
	sn := startLoaded(t, scfg)
	defer sn.Close()
	add(scrapeMetrics(t, sn.HTTPAddr()))

	ec := etcdtest.Start(t, 1)
	cn, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 4,
		Logger:  slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/dashboard/", LeaseTTL: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	waitMetric(t, cn.HTTPAddr(), 20*time.Second, eq(4), "cohort_cluster_partitions_acquired_total")
	waitMetric(t, cn.HTTPAddr(), 20*time.Second, eq(0), "cohort_coordinator_partitions_loading")
	cs := scrapeMetrics(t, cn.HTTPAddr())
	for _, want := range []struct {
		name string
		v    float64
	}{{"cohort_cluster_lease_valid", 1}, {"cohort_cluster_lease_sessions_total", 1}, {"cohort_cluster_nodes", 1},
		{"cohort_coordinator_partitions_owned", 4}, {"cohort_cluster_partitions_released_total", 0}} {
		if v := cs.value(want.name); v != want.v {
			t.Errorf("cluster node: %s %v, want %v", want.name, v, want.v)
		}
	}
	if code, body := httpGet(t, cn.HTTPAddr(), "/readyz"); code != 200 {
		t.Errorf("cluster node /readyz with its 4 partitions loaded: %d %q", code, body)
	}
	add(cs)

	name := regexp.MustCompile(`\bcohort_[a-z0-9_]+`)
	used := map[string]bool{}
	for _, q := range queries {
		for _, m := range name.FindAllString(q, -1) {
			if _, ok := exported[m]; !ok {
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base, cut := strings.CutSuffix(m, suffix); cut && exported[base] == "HISTOGRAM" {
						m = base
					}
				}
			}
			if _, ok := exported[m]; !ok {
				t.Errorf("the dashboard queries %s, which no node exports: %s", m, q)
			}
			used[m] = true
		}
	}
	// Every cohort family has a panel.
	for m := range exported {
		if strings.HasPrefix(m, "cohort_") && !used[m] {
			t.Errorf("no dashboard panel shows %s", m)
		}
	}
	if t.Failed() {
		t.Logf("exported: %v", slices.Sorted(maps.Keys(exported)))
	}
}
