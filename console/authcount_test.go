package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestConsoleSHA256OnlyUserCountsNoFailure: page views of a user holding
// only a SCRAM-SHA-256 credential count no failed authentication (each one
// counted, and logged, a SCRAM-SHA-512 failure: "unknown user"); a wrong
// password of that user still counts one failure per mechanism, as for an
// unknown user, so the two cannot be told apart.
func TestConsoleSHA256OnlyUserCountsNoFailure(t *testing.T) {
	n := startNode(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, n, true))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-pw"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	base := "http://" + n.HTTPAddr() + "/console/"
	before := authCounts(t, n.HTTPAddr())
	for range 2 {
		if code, body := get(t, base+"topics", "bob", "bob-pw"); code != http.StatusOK {
			t.Fatalf("bob: %d %s", code, body)
		}
	}
	after := authCounts(t, n.HTTPAddr())
	for _, k := range []string{"SCRAM-SHA-512 failure", "SCRAM-SHA-256 failure"} {
		if d := after[k] - before[k]; d != 0 {
			t.Errorf("%s: +%d after two page views with the right password, want +0", k, d)
		}
	}
	if after["SCRAM-SHA-256 success"] == before["SCRAM-SHA-256 success"] {
		t.Errorf("no SCRAM-SHA-256 success counted (before %v, after %v)", before, after)
	}
	for _, user := range []string{"bob", "nobody"} {
		before = authCounts(t, n.HTTPAddr())
		if code, _ := get(t, base+"topics", user, "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("%s with a wrong password: %d, want 401", user, code)
		}
		after = authCounts(t, n.HTTPAddr())
		for _, k := range []string{"SCRAM-SHA-512 failure", "SCRAM-SHA-256 failure"} {
			if d := after[k] - before[k]; d != 1 {
				t.Errorf("%s, wrong password: %s +%d, want +1", user, k, d)
			}
		}
	}
}

// TestConsoleLoginsWithinTheSlot: every login of a page view runs while the
// view holds its login slot. kgo opens two connections to the node, the
// seed's and the broker's, and each logs in (a PBKDF2 on this node); the
// broker's opened after the slot was released, so the bound on console
// logins bounded only half of them.
func TestConsoleLoginsWithinTheSlot(t *testing.T) {
	n := startNode(t, true)
	c := New(n, nil, nil)
	var dials, outside atomic.Int32
	c.testHookSelfDial = func() {
		dials.Add(1)
		if len(c.logins) == 0 {
			outside.Add(1)
		}
	}
	before := authCounts(t, n.HTTPAddr())
	if w := serveAs(c, "127.0.0.1:9100", false, "admin", adminPassword); w.Code != http.StatusOK {
		t.Fatalf("page view: %d %s", w.Code, w.Body)
	}
	after := authCounts(t, n.HTTPAddr())
	if o := outside.Load(); o != 0 {
		t.Errorf("%d of the page view's %d connections to the node were opened (and logged in) outside the login slot", o, dials.Load())
	}
	if d := after["SCRAM-SHA-512 success"] - before["SCRAM-SHA-512 success"]; d != int(dials.Load()) || d > 2 {
		t.Errorf("%d logins for %d connections, want one each and at most two", d, dials.Load())
	}
}
