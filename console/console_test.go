package console

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/byname"
)

// TestPagesWithoutScripts: on a node without authentication the groups,
// group and topics pages carry everything in their HTML (no script needed):
// the group, its state and committed offsets, the topics; the filter and
// sort query parameters work.
func TestPagesWithoutScripts(t *testing.T) {
	n := startNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, n, false))
	commit(ctx, t, adm, "orders-app", "orders", 3)
	commit(ctx, t, adm, "billing-app", "billing", 1)
	// A topic only a data cluster has, committed by name (v9): the
	// console lists it too (it reads offsets at v9, internal/byname).
	outside := kmsg.NewPtrOffsetCommitRequest()
	outside.Group, outside.Generation = "orders-app", -1
	outside.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "outside", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 4, Offset: 44, LeaderEpoch: -1}}}}
	if resp, err := outside.RequestWith(ctx, kafkaClient(t, n, false, byname.Opt())); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit of outside/4: %v %+v", err, resp)
	}
	base := "http://" + n.HTTPAddr() + "/console/"

	code, body := get(t, base, "", "")
	if code != http.StatusOK {
		t.Fatalf("groups page: %d %s", code, body)
	}
	for _, want := range []string{`href="/console/groups/orders-app"`, `href="/console/groups/billing-app"`, ">Empty<", "2 of 2 groups"} {
		if !strings.Contains(body, want) {
			t.Errorf("groups page lacks %q", want)
		}
	}
	// Filter: no group is Stable; sort by name descending.
	if _, body := get(t, base+"?state=Stable", "", ""); !strings.Contains(body, "0 of 2 groups") || strings.Contains(body, "/console/groups/orders-app") {
		t.Errorf("state=Stable still lists groups")
	}
	_, body = get(t, base+"?sort=&desc=1", "", "")
	if i, j := strings.Index(body, "groups/orders-app"), strings.Index(body, "groups/billing-app"); i < 0 || j < 0 || i > j {
		t.Errorf("desc=1: orders-app should come before billing-app (%d, %d)", i, j)
	}

	// A setting given to the (classic) group is shown; the others, the
	// node's, only for a consumer-protocol group.
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "orders-app"
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "consumer.session.timeout.ms", kmsg.StringPtr("60000")
	ar.Configs = append(ar.Configs, ac)
	alter.Resources = append(alter.Resources, ar)
	if resp, err := alter.RequestWith(ctx, kafkaClient(t, n, false)); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, resp)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "next-app", "m1", 60000
	hb.SubscribedTopicNames, hb.Topics = []string{"orders"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp, err := hb.RequestWith(ctx, kafkaClient(t, n, false)); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ConsumerGroupHeartbeat: %v %+v", err, resp)
	}
	_, body = get(t, base+"groups/next-app", "", "")
	for _, want := range []string{"<code>consumer.session.timeout.ms</code> 45000 ms</div>", "<code>consumer.heartbeat.interval.ms</code>"} {
		if !strings.Contains(body, want) {
			t.Errorf("consumer group page lacks %q:\n%s", want, body)
		}
	}

	code, body = get(t, base+"groups/orders-app", "", "")
	if code != http.StatusOK {
		t.Fatalf("group page: %d %s", code, body)
	}
	if strings.Contains(body, "consumer.heartbeat.interval.ms") {
		t.Errorf("classic group page shows a setting the group does not set")
	}
	for _, want := range []string{`id="state">Empty<`, `<code>consumer.session.timeout.ms</code> 60000 ms <span class="tag">this group's</span>`, "<td>orders</td><td class=\"num\">2</td><td class=\"num\">102</td>", "No members.",
		"<td>outside</td><td class=\"num\">4</td><td class=\"num\">44</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("group page lacks %q:\n%s", want, body)
		}
	}
	// One row per committed partition (each was listed twice once).
	for p := range 3 {
		row := fmt.Sprintf("<td>orders</td><td class=\"num\">%d</td><td class=\"num\">%d</td>", p, 100+p)
		if n := strings.Count(body, row); n != 1 {
			t.Errorf("group page lists orders/%d %d times, want once", p, n)
		}
	}
	if code, _ := get(t, base+"groups/nobody", "", ""); code != http.StatusNotFound {
		t.Errorf("unknown group: %d, want 404", code)
	}
	code, body = get(t, base+"topics", "", "")
	if code != http.StatusOK || !strings.Contains(body, "<td>orders</td><td class=\"num\">3</td>") || !strings.Contains(body, "billing") {
		t.Errorf("topics page: %d\n%s", code, body)
	}
	// The assets are embedded; the root redirects to the console.
	if code, body := get(t, base+"static/console.css", "", ""); code != http.StatusOK || !strings.Contains(body, ".timeline") {
		t.Errorf("console.css: %d", code)
	}
	if code, _ := get(t, "http://"+n.HTTPAddr()+"/", "", ""); code != http.StatusOK {
		t.Errorf("/ (redirected to the console): %d", code)
	}
	if code, _ := get(t, base+"cluster", "", ""); code != http.StatusNotFound {
		t.Errorf("cluster page of a single node: %d, want 404", code)
	}
}

// serveAs runs the console's handler on a request that arrived on local
// (the listener's address), with TLS or not.
func serveAs(c http.Handler, local string, tlsOn bool, user, pass string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/console/", nil)
	addr, _ := net.ResolveTCPAddr("tcp", local)
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, addr))
	if tlsOn {
		req.TLS = &tls.ConnectionState{}
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	return w
}

// TestLoopbackOnlyWithoutAuth: a node that authenticates no one serves
// its console only on a loopback HTTP listener.
func TestLoopbackOnlyWithoutAuth(t *testing.T) {
	n := startNode(t, false)
	c := New(n, nil, nil)
	if w := serveAs(c, "10.1.2.3:9100", false, "", ""); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "loopback") {
		t.Errorf("non-loopback listener: %d %s", w.Code, w.Body)
	}
	if w := serveAs(c, "10.1.2.3:9100", true, "", ""); w.Code != http.StatusForbidden {
		t.Errorf("non-loopback listener with TLS: %d, want 403 (no authentication)", w.Code)
	}
	if w := serveAs(c, "127.0.0.1:9100", false, "", ""); w.Code != http.StatusOK {
		t.Errorf("loopback: %d %s", w.Code, w.Body)
	}
	if w := serveAs(c, "[::1]:9100", false, "", ""); w.Code != http.StatusOK {
		t.Errorf("::1: %d", w.Code)
	}
}

// TestAuthAndACLs: with SCRAM users the console asks for credentials
// (401 without or with a wrong password), refuses plain HTTP on a
// non-loopback listener, and shows a user only the groups and topics its
// ACLs let it describe.
func TestAuthAndACLs(t *testing.T) {
	n := startNode(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kcl := kafkaClient(t, n, true)
	adm := kadm.NewClient(kcl)
	commit(ctx, t, adm, "visible-app", "visible", 2)
	commit(ctx, t, adm, "hidden-app", "hidden", 2)
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: m, Iterations: 4096, Password: "alice-pw"}})
		if err != nil || res.Error() != nil {
			t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
		}
	}
	// A consumer-protocol group alice may describe whose member holds the
	// hidden topic: the coordinator withholds the group, and the console
	// says why with a 403 (it answered 502, as if the node had failed).
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "mixed-848", "m-1", 0, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"hidden"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp, err := hb.RequestWith(ctx, kcl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ConsumerGroupHeartbeat: %v %+v", err, resp)
	}
	acls := kadm.NewACLs().Allow("User:alice").Groups("visible-app", "mixed-848").Topics("visible").Operations(kadm.OpDescribe)
	if res, err := adm.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	base := "http://" + n.HTTPAddr() + "/console/"

	code, _ := get(t, base, "", "")
	if code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code, _ := get(t, base, "alice", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", code)
	}
	// alice has only a SCRAM-SHA-256 credential: the console falls back.
	code, body := get(t, base, "alice", "alice-pw")
	if code != http.StatusOK {
		t.Fatalf("alice: %d %s", code, body)
	}
	if !strings.Contains(body, "groups/visible-app") || strings.Contains(body, "hidden-app") || !strings.Contains(body, "<b>alice</b>") {
		t.Errorf("alice's groups page:\n%s", body)
	}
	// The row of mixed-848 comes from the node's summary, which names no
	// topic and needs only DESCRIBE on the group (group-semantics.md
	// §describe): its member, no error.
	if row := regexp.MustCompile(`(?s)<tr data-group="mixed-848".*?</tr>`).FindString(body); !regexp.MustCompile(`(?s)state-stable">Stable<.*<td>consumer / uniform</td>\s*<td class="num">1</td>`).MatchString(row) ||
		strings.Contains(row, `class="error"`) || strings.Contains(row, "hidden") {
		t.Errorf("alice's row of mixed-848, want Stable, its assignor and 1 member, no error, no topic: %s", row)
	}
	if code, _ := get(t, base+"groups/hidden-app", "alice", "alice-pw"); code != http.StatusForbidden {
		t.Errorf("alice on hidden-app: %d, want 403", code)
	}
	if code, body := get(t, base+"groups/mixed-848", "alice", "alice-pw"); code != http.StatusForbidden ||
		!strings.Contains(body, "topics you may not describe") || strings.Contains(body, "hidden") {
		t.Errorf("alice on mixed-848: %d, want 403 naming no topic\n%s", code, body)
	}
	if code, body := get(t, base+"groups/mixed-848", "admin", adminPassword); code != http.StatusOK || !strings.Contains(body, "m-1") {
		t.Errorf("admin on mixed-848: %d\n%s", code, body)
	}
	if code, body := get(t, base+"groups/visible-app", "alice", "alice-pw"); code != http.StatusOK || !strings.Contains(body, "<td>visible</td>") {
		t.Errorf("alice on visible-app: %d\n%s", code, body)
	}
	_, body = get(t, base+"topics", "alice", "alice-pw")
	if !strings.Contains(body, "<td>visible</td>") || strings.Contains(body, "hidden") {
		t.Errorf("alice's topics page:\n%s", body)
	}
	_, body = get(t, base, "admin", adminPassword)
	if !strings.Contains(body, "hidden-app") || !strings.Contains(body, "visible-app") {
		t.Errorf("admin's groups page lacks a group:\n%s", body)
	}

	c := New(n, nil, nil)
	if w := serveAs(c, "10.1.2.3:9100", false, "alice", "alice-pw"); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "--http-tls") {
		t.Errorf("plain HTTP on a non-loopback listener: %d %s", w.Code, w.Body)
	}
	if w := serveAs(c, "10.1.2.3:9100", true, "alice", "alice-pw"); w.Code != http.StatusOK {
		t.Errorf("TLS on a non-loopback listener: %d %s", w.Code, w.Body)
	}
	if w := serveAs(c, "10.1.2.3:9100", true, "", ""); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("TLS without credentials: %d, want 401 with WWW-Authenticate", w.Code)
	}
}

// TestConsoleLoginsBounded: the SCRAM logins the console runs (a PBKDF2 on
// this node each) are bounded; a request that finds no free slot within the
// console's timeout is answered 503 with Retry-After, not queued for ever,
// and is served once a slot frees.
func TestConsoleLoginsBounded(t *testing.T) {
	n := startNode(t, true)
	c := New(n, nil, nil)
	c.timeout = 100 * time.Millisecond
	for range cap(c.logins) {
		c.logins <- struct{}{}
	}
	w := serveAs(c, "127.0.0.1:9100", false, "admin", adminPassword)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("with every login slot taken: %d (Retry-After %q) %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	<-c.logins
	c.timeout = 10 * time.Second
	if w := serveAs(c, "127.0.0.1:9100", false, "admin", adminPassword); w.Code != http.StatusOK {
		t.Fatalf("with a slot free: %d %s", w.Code, w.Body)
	}
	if len(c.logins) != cap(c.logins)-1 {
		t.Fatalf("%d login slots taken after the login, want %d (the slot is released)", len(c.logins), cap(c.logins)-1)
	}
}
