package node

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"
)

// ruleFile is the shape of a Prometheus rule file, alerting rules only:
// UnmarshalStrict refuses any other field (a recording rule, a misspelt
// key), which Prometheus would refuse too.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// promFunctions are the PromQL functions, aggregations and keywords an
// expression of the rules may use; any other name must be a metric.
var promFunctions = map[string]bool{
	"abs": true, "absent": true, "avg_over_time": true, "ceil": true, "changes": true, "clamp_max": true,
	"clamp_min": true, "delta": true, "deriv": true, "floor": true, "histogram_quantile": true, "increase": true,
	"irate": true, "label_replace": true, "max_over_time": true, "min_over_time": true, "predict_linear": true,
	"rate": true, "resets": true, "round": true, "time": true, "timestamp": true, "vector": true,
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "topk": true, "bottomk": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
}

var (
	promString     = regexp.MustCompile(`"[^"]*"`)
	promRange      = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promBraces     = regexp.MustCompile(`\{[^}]*\}`)
	promIdent      = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promAnySel     = regexp.MustCompile(`\b([a-z_:][a-z0-9_:]*)\s*\{([^}]*)\}`)
	templateLabel  = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	templateAction = regexp.MustCompile(`\{\{(.*?)\}\}`)
	mdHeading      = regexp.MustCompile(`(?m)^#+\s+(.*)$`)
)

// githubAnchor is the anchor GitHub gives a markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// checkAlertExpr checks what checkPromQL does not: every name that is not a
// function or keyword is a metric a node exports, or up (which Prometheus
// makes for each target); each selector of such a metric matches only
// labels it has (or job and instance); every value of the error label,
// matched in any way, is a Kafka error name; parentheses balance.
func checkAlertExpr(expr string, exported map[string]*family, errorNames map[string]bool) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
		bad("unbalanced parentheses or braces")
	}
	for _, sel := range promAnySel.FindAllStringSubmatch(expr, -1) {
		for _, mt := range promMatcher.FindAllStringSubmatch(sel[2], -1) {
			label, value := mt[1], mt[3]
			if f := exported[sel[1]]; !promLabels[label] && (f == nil || f.labels[label] == nil) &&
				!strings.HasPrefix(sel[1], "cohort_") { // checkPromQL covers cohort_ families
				bad("%s has no label %s", sel[1], label)
			}
			if label == "error" {
				for _, v := range strings.Split(value, "|") {
					if !errorNames[v] {
						bad("%s{error} matches %q, not a Kafka error name", sel[1], v)
					}
				}
			}
		}
	}
	bare := promString.ReplaceAllString(expr, `""`)
	bare = promRange.ReplaceAllString(bare, "")
	bare = promGrouping.ReplaceAllString(bare, "")
	bare = promBraces.ReplaceAllString(bare, "")
	for _, loc := range promIdent.FindAllStringIndex(bare, -1) {
		if loc[0] > 0 && strings.ContainsRune("0123456789.", rune(bare[loc[0]-1])) {
			continue // a number's exponent or suffix
		}
		name := bare[loc[0]:loc[1]]
		call := strings.HasPrefix(strings.TrimLeft(bare[loc[1]:], " "), "(")
		switch {
		case promFunctions[name]:
		case call:
			bad("%s( is no PromQL function this test knows", name)
		case name == "up":
		case exported[name] == nil:
			if f, _ := strings.CutSuffix(name, "_bucket"); exported[f] == nil || exported[f].typ != "HISTOGRAM" {
				bad("%s is not exported", name)
			}
		}
	}
	return problems
}

// TestPrometheusAlerts parses docs/prometheus-alerts.yml as a Prometheus
// rule file and checks each alert: its fields (alert, expr, for,
// labels.severity, annotations summary, description and runbook), its
// expression against what a node exports, alone, with SASL over TLS and
// in cluster mode (checkPromQL and checkAlertExpr), the labels its
// annotations show (kept by the expression), and that its runbook names a
// section of cohort's docs that exists.
func TestPrometheusAlerts(t *testing.T) {
	raw, err := os.ReadFile("../docs/prometheus-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(raw, &rf); err != nil {
		t.Fatalf("docs/prometheus-alerts.yml is not a rule file of alerting rules: %v", err)
	}
	exported := scrapedFamilies(t)
	errorNames := kafkaErrorNames()
	anchors := map[string]map[string]bool{}
	names := map[string]bool{}
	count := 0
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: a group needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			count++
			where := fmt.Sprintf("group %s, alert %q", g.Name, r.Alert)
			if !regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`).MatchString(r.Alert) || names[r.Alert] {
				t.Errorf("%s: the name is empty, not CamelCase, or taken", where)
			}
			names[r.Alert] = true
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for %q, want a positive duration", where, r.For)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			expr := strings.Join(strings.Fields(r.Expr), " ")
			if expr == "" {
				t.Errorf("%s: no expr", where)
				continue
			}
			// The labels the annotations show must be in the result:
			// checkPromQL checks a legend's, here made of them.
			var legend []string
			aggregated := promAggregate.MatchString(expr)
			for _, a := range r.Annotations {
				for _, act := range templateAction.FindAllStringSubmatch(a, -1) {
					for _, l := range templateLabel.FindAllStringSubmatch(act[1], -1) {
						if promLabels[l[1]] && !aggregated {
							continue // job and instance are on every series scraped
						}
						legend = append(legend, "{{"+l[1]+"}}")
					}
				}
			}
			for _, p := range checkPromQL(expr, strings.Join(legend, " "), exported, errorNames) {
				t.Errorf("%s: %s: %s", where, expr, p)
			}
			for _, p := range checkAlertExpr(expr, exported, errorNames) {
				t.Errorf("%s: %s: %s", where, expr, p)
			}
			file, anchor, _ := strings.Cut(r.Annotations["runbook"], "#")
			if anchors[file] == nil {
				anchors[file] = map[string]bool{}
				md, err := os.ReadFile(filepath.Join("..", file))
				if err != nil || !strings.HasPrefix(file, "docs/") || !strings.HasSuffix(file, ".md") {
					t.Errorf("%s: runbook %s is not a document of docs/", where, file)
				}
				for _, h := range mdHeading.FindAllStringSubmatch(string(md), -1) {
					anchors[file][githubAnchor(h[1])] = true
				}
			}
			if !anchors[file][anchor] {
				t.Errorf("%s: runbook %s: %s has no section #%s", where, r.Annotations["runbook"], file, anchor)
			}
		}
	}
	if count < 15 {
		t.Errorf("%d alerts in the file", count)
	}
}
