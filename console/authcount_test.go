package console

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// authCounts sums cohort_server_authentications_total by mechanism and
// result ("SCRAM-SHA-512 failure") from the node's /metrics.
func authCounts(t *testing.T, httpAddr string) map[string]int {
	t.Helper()
	code, body := get(t, "http://"+httpAddr+"/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	out := map[string]int{}
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, "cohort_server_authentications_total{") {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cohort_server_authentications_total{"), "} ")
		var mech, result string
		for l := range strings.SplitSeq(labels, ",") {
			k, v, _ := strings.Cut(l, "=")
			switch k {
			case "mechanism":
				mech = strings.Trim(v, `"`)
			case "result":
				result = strings.Trim(v, `"`)
			}
		}
		k, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		out[mech+" "+result] += int(k)
	}
	return out
}

// TestConsoleWrongPasswordCountsTwice: one console request with a wrong
// password of a user holding both SCRAM credentials is two failed
// authentications on the node: the console tries SCRAM-SHA-512, then
// SCRAM-SHA-256 (docs/console.md says so).
func TestConsoleWrongPasswordCountsTwice(t *testing.T) {
	n := startNode(t, true)
	before := authCounts(t, n.HTTPAddr())
	if code, _ := get(t, "http://"+n.HTTPAddr()+"/console/", "admin", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", code)
	}
	after := authCounts(t, n.HTTPAddr())
	for _, k := range []string{"SCRAM-SHA-512 failure", "SCRAM-SHA-256 failure"} {
		if d := after[k] - before[k]; d != 1 {
			t.Errorf("%s: +%d, want +1 (before %v, after %v)", k, d, before, after)
		}
	}
}
