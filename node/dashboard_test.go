package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
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

// family is what a node's /metrics shows of one metric family: its type
// and, for each label, the values its series have.
type family struct {
	typ    string // COUNTER, GAUGE, HISTOGRAM
	labels map[string]map[string]bool
}

// exportedFamilies scrapes the families a node exports: alone (after one
// request answered with an error, so that the error family has a series),
// with a SASL listener (the families by SASL mechanism) and in cluster mode.
func exportedFamilies(t *testing.T) map[string]*family {
	exported := map[string]*family{}
	add := func(s scrape) {
		for name, mf := range s {
			f := exported[name]
			if f == nil {
				f = &family{typ: mf.GetType().String(), labels: map[string]map[string]bool{}}
				exported[name] = f
			}
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if f.labels[l.GetName()] == nil {
						f.labels[l.GetName()] = map[string]bool{}
					}
					f.labels[l.GetName()][l.GetValue()] = true
				}
			}
		}
	}
	n := metricsNode(t, memstore.New())
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "nobody", "nobody"
	if _, err := hb.RequestWith(t.Context(), client(t, n.Addr())); err != nil {
		t.Fatal(err)
	}
	// A describe of a group that is not there (GROUP_ID_NOT_FOUND from v6),
	// as monitoring tools send for consumer-protocol groups
	// (docs/compatibility.md names the series).
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 6, []string{"nobody"}
	if _, err := dg.RequestWith(t.Context(), client(t, n.Addr())); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, n.HTTPAddr(), 5*time.Second, above(0), "cohort_server_request_errors_total", "api", "Heartbeat")
	waitMetric(t, n.HTTPAddr(), 5*time.Second, above(0), "cohort_server_request_errors_total", "api", "DescribeGroups", "error", "GROUP_ID_NOT_FOUND")
	add(scrapeMetrics(t, n.HTTPAddr()))

	// A node with SASL listeners, one over TLS: the families by SASL
	// mechanism, and those of its certificate.
	scfg := secureConfig(t, memstore.New())
	scfg.HTTPListen = "127.0.0.1:0"
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "cohort")
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	scfg.Listeners = append(scfg.Listeners, server.Listener{Protocol: server.ProtocolSASLSSL, Addr: "127.0.0.1:0"})
	scfg.Security.TLS = srvTLS
	sn := startLoaded(t, scfg)
	defer sn.Close()
	add(scrapeMetrics(t, sn.HTTPAddr()))

	ec := etcdtest.Start(t, 1)
	cn, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 4,
		Logger:  slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/dashboard/", LeaseTTL: testLeaseTTL}})
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
		{"cohort_cluster_nodes_unadvertised", 0},
		{"cohort_coordinator_partitions_owned", 4}, {"cohort_cluster_partitions_released_total", 0}, {"cohort_ready", 1}} {
		if v := cs.value(want.name); v != want.v {
			t.Errorf("cluster node: %s %v, want %v", want.name, v, want.v)
		}
	}
	if code, body := httpGet(t, cn.HTTPAddr(), "/readyz"); code != 200 {
		t.Errorf("cluster node /readyz with its 4 partitions loaded: %d %q", code, body)
	}
	add(cs)
	return exported
}

// dashboardTarget is one query of the dashboard with its legend.
type dashboardTarget struct{ expr, legend string }

// dashboardTargets returns the panels' targets (expr and legendFormat).
func dashboardTargets(v any) []dashboardTarget {
	var out []dashboardTarget
	switch x := v.(type) {
	case map[string]any:
		if e, ok := x["expr"].(string); ok {
			l, _ := x["legendFormat"].(string)
			out = append(out, dashboardTarget{e, l})
		}
		for _, e := range x {
			out = append(out, dashboardTargets(e)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, dashboardTargets(e)...)
		}
	}
	return out
}

var (
	promMetric    = regexp.MustCompile(`\bcohort_[a-z0-9_]+`)
	promSelector  = regexp.MustCompile(`\b(cohort_[a-z0-9_]+)\s*\{([^}]*)\}`)
	promMatcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	promBy        = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	promRate      = regexp.MustCompile(`\b(rate|irate|increase|delta|deriv)\(\s*(cohort_[a-z0-9_]+)`)
	promAggregate = regexp.MustCompile(`^\s*(?:histogram_quantile\([^,]+,\s*)?(?:sum|max|min|avg|count)\s*(?:by\s*\(([^)]*)\))?\s*\(`)
	promLegend    = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
)

// promLabels are the labels Prometheus adds to every series it scrapes.
var promLabels = map[string]bool{"instance": true, "job": true}

// checkPromQL checks one PromQL expression against the exported families:
// every metric is exported (a histogram's _bucket, _sum or _count series
// by its family), every label matched on or grouped by is one the metric
// has (le: a histogram's _bucket), every label value matched exactly (or
// as an alternation of literals) is one the metric exports, rate and its
// kin read counters or histogram series only, histogram_quantile reads
// _bucket series only, and every label of legend is one the result keeps.
// errorNames are the values the error label may take beyond those seen.
func checkPromQL(expr, legend string, exported map[string]*family, errorNames map[string]bool) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// base returns the family of a series name and its suffix.
	base := func(m string) (*family, string) {
		if f, ok := exported[m]; ok {
			return f, ""
		}
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, cut := strings.CutSuffix(m, suffix); cut && exported[b] != nil && exported[b].typ == "HISTOGRAM" {
				return exported[b], suffix
			}
		}
		return nil, ""
	}
	has := func(m, label string) bool {
		f, suffix := base(m)
		return f != nil && (f.labels[label] != nil || promLabels[label] || (label == "le" && suffix == "_bucket"))
	}
	metrics := promMetric.FindAllString(expr, -1)
	for _, m := range metrics {
		if f, _ := base(m); f == nil {
			bad("%s is not exported", m)
		}
	}
	for _, sel := range promSelector.FindAllStringSubmatch(expr, -1) {
		f, _ := base(sel[1])
		if f == nil {
			continue
		}
		for _, mt := range promMatcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := mt[1], mt[2], mt[3]
			if !has(sel[1], label) {
				bad("%s has no label %s", sel[1], label)
				continue
			}
			if promLabels[label] || strings.Contains(value, "$") || (op != "=" && op != "=~") ||
				strings.ContainsAny(value, `.*+?()[]\^`) {
				continue
			}
			for _, v := range strings.Split(value, "|") {
				if !f.labels[label][v] && !(label == "error" && errorNames[v]) {
					bad("%s{%s} has no value %q", sel[1], label, v)
				}
			}
		}
	}
	for _, by := range promBy.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(by[1], ",") {
			l = strings.TrimSpace(l)
			found := false
			for _, m := range metrics {
				found = found || has(m, l)
			}
			if l != "" && !found {
				bad("grouped by %s, which %v lack", l, metrics)
			}
		}
	}
	for _, r := range promRate.FindAllStringSubmatch(expr, -1) {
		if f, suffix := base(r[2]); f != nil && f.typ != "COUNTER" && suffix == "" {
			bad("%s over %s, a %s", r[1], r[2], strings.ToLower(f.typ))
		}
	}
	if strings.Contains(expr, "histogram_quantile") {
		for _, m := range metrics {
			if _, suffix := base(m); suffix != "_bucket" {
				bad("histogram_quantile over %s, not a histogram's _bucket series", m)
			}
		}
	}
	// The labels the result keeps: an outer aggregation's by clause, or
	// the metrics' own.
	kept := func(l string) bool {
		if a := promAggregate.FindStringSubmatch(expr); a != nil {
			for _, k := range strings.Split(a[1], ",") {
				if strings.TrimSpace(k) == l && l != "le" {
					return true
				}
			}
			return false
		}
		for _, m := range metrics {
			if has(m, l) {
				return true
			}
		}
		return false
	}
	for _, l := range promLegend.FindAllStringSubmatch(legend, -1) {
		if !kept(l[1]) {
			bad("the legend %q shows %s, which the result does not have", legend, l[1])
		}
	}
	return problems
}

// kafkaErrorNames are the names the error label takes: Kafka's error
// names, as kerr has them.
func kafkaErrorNames() map[string]bool {
	names := map[string]bool{"UNKNOWN_SERVER_ERROR": true}
	for code := int16(-1); code < 256; code++ {
		var ke *kerr.Error
		if errors.As(kerr.ErrorForCode(code), &ke) && ke.Code == code {
			names[ke.Message] = true
		}
	}
	return names
}

var (
	exportedOnce    sync.Once
	exportedScraped map[string]*family
)

// scrapedFamilies is exportedFamilies, scraped once for the tests that
// compare documents with it.
func scrapedFamilies(t *testing.T) map[string]*family {
	exportedOnce.Do(func() { exportedScraped = exportedFamilies(t) })
	if exportedScraped == nil {
		t.Fatal("scraping the nodes failed (see the first test that asked)")
	}
	return exportedScraped
}

// TestGrafanaDashboard parses docs/grafana-dashboard.json and checks its
// queries against what a node exports (alone, with SASL, or in cluster
// mode): metrics, labels, label values, functions fit for each type, and
// legends (checkPromQL); and that every cohort_ family has a panel.
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
	targets := dashboardTargets(dash)
	if len(queries) < 10 || len(targets) < 10 {
		t.Fatalf("%d queries, %d targets in the dashboard", len(queries), len(targets))
	}
	// Grafana's import replaces only the text ${NAME} of each input with
	// what the user picked (pkg/services/dashboardimport/utils): an input
	// nothing refers to asks a question whose answer is dropped.
	inputs, _ := dash["__inputs"].([]any)
	for _, in := range inputs {
		name, _ := in.(map[string]any)["name"].(string)
		if !strings.Contains(string(raw), "${"+name+"}") {
			t.Errorf("the dashboard declares the import input %s, which nothing refers to: what the user picks for it at import is ignored", name)
		}
	}
	exported := scrapedFamilies(t)
	errorNames := kafkaErrorNames()
	for _, q := range queries {
		for _, p := range checkPromQL(q, "", exported, errorNames) {
			t.Errorf("dashboard query %s: %s", q, p)
		}
	}
	for _, tg := range targets {
		if tg.legend == "" {
			continue
		}
		for _, p := range checkPromQL(tg.expr, tg.legend, exported, errorNames) {
			if strings.HasPrefix(p, "the legend") {
				t.Errorf("dashboard query %s: %s", tg.expr, p)
			}
		}
	}
	used := map[string]bool{}
	for _, q := range queries {
		for _, m := range promMetric.FindAllString(q, -1) {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if b, cut := strings.CutSuffix(m, suffix); cut && exported[b] != nil {
					m = b
				}
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

var (
	opsTableRow = regexp.MustCompile("(?m)^\\| `(cohort_[a-z0-9_]+)` \\| ([a-z]*) \\|([^|]*)\\|")
	codeSpan    = regexp.MustCompile("`([^`]+)`")
	fenced      = regexp.MustCompile("(?ms)^```.*?^```")
	backticked  = regexp.MustCompile("`([a-z_]+)`")
)

// TestMetricsDocs compares the documents with what a node exports. The
// metrics tables of docs/operations.md: every cohort_ family a node exports
// has a row, every row is exported, with its type and its labels. Every
// metric any document names exists (cohort_x* a prefix of one), and every
// PromQL expression in their code spans passes checkPromQL.
func TestMetricsDocs(t *testing.T) {
	exported := scrapedFamilies(t)
	errorNames := kafkaErrorNames()

	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, row := range opsTableRow.FindAllStringSubmatch(string(ops), -1) {
		name, typ, labelCell := row[1], row[2], row[3]
		if rows[name] {
			t.Errorf("operations.md: %s has two rows", name)
		}
		rows[name] = true
		f := exported[name]
		if f == nil {
			t.Errorf("operations.md documents %s, which no node exports", name)
			continue
		}
		if want := strings.ToLower(f.typ); typ != want {
			t.Errorf("operations.md: %s is a %s, documented as %q", name, want, typ)
		}
		var documented []string
		for _, l := range backticked.FindAllStringSubmatch(labelCell, -1) {
			documented = append(documented, l[1])
		}
		slices.Sort(documented)
		if actual := slices.Sorted(maps.Keys(f.labels)); !slices.Equal(documented, actual) {
			t.Errorf("operations.md: %s has labels %v, documented as %v", name, actual, documented)
		}
	}
	for name := range exported {
		if strings.HasPrefix(name, "cohort_") && !rows[name] {
			t.Errorf("operations.md has no row for %s", name)
		}
	}

	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	exprs := 0
	for _, path := range append(docs, "../README.md") {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		for _, loc := range promMetric.FindAllStringIndex(text, -1) {
			m := text[loc[0]:loc[1]]
			if loc[1] < len(text) && text[loc[1]] == '*' {
				if !slices.ContainsFunc(slices.Collect(maps.Keys(exported)), func(e string) bool { return strings.HasPrefix(e, m) }) {
					t.Errorf("%s names %s*, which matches no exported metric", path, m)
				}
				continue
			}
			if len(checkPromQL(m, "", exported, errorNames)) > 0 {
				t.Errorf("%s names %s, which no node exports", path, m)
			}
		}
		for _, span := range codeSpan.FindAllStringSubmatch(fenced.ReplaceAllString(text, ""), -1) {
			expr := strings.ReplaceAll(span[1], "\n", " ")
			if !promMetric.MatchString(expr) || !strings.ContainsAny(expr, "({") {
				continue
			}
			exprs++
			for _, p := range checkPromQL(expr, "", exported, errorNames) {
				t.Errorf("%s: the expression %s: %s", path, expr, p)
			}
		}
	}
	if exprs < 5 {
		t.Errorf("found %d PromQL expressions in the documents", exprs)
	}
}
