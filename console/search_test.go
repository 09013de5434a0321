package console

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveURL sends GET target (a path and query under /console/) to the
// console c as if it came to a loopback HTTP listener, with optional basic
// credentials.
func serveURL(c http.Handler, target, user, pass string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	addr, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:9100")
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, addr))
	req.RemoteAddr = "127.0.0.1:50000"
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	return w
}

// shownGroups are the ids of the rows of a groups page, in order.
func shownGroups(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr data-group="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// joinWithProtocolType makes grp a classic group of protocol type ptype with one
// member that has joined (the group then waits for its SyncGroup).
func joinWithProtocolType(ctx context.Context, t *testing.T, cl *kgo.Client, grp, ptype string) {
	t.Helper()
	member := ""
	for range 2 { // the first answer is MEMBER_ID_REQUIRED, with the id
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = grp, member, ptype
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "p1", []byte{0}
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("JoinGroup %s: %v", grp, err)
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			member = resp.MemberID
			continue
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("JoinGroup %s: %v", grp, kerr.ErrorForCode(resp.ErrorCode))
		}
		return
	}
	t.Fatalf("JoinGroup %s: no member id", grp)
}

// TestGroupsSearch: the groups page finds groups by a part of their id
// (case-sensitive, anywhere or at the start) and by protocol type, with
// the state and type filters; it says how many match, shows at most
// maxGroupRows of them and says when it cuts the list; its form and links
// keep the search; a query too long, not UTF-8, or of an unknown match
// mode is a 400.
func TestGroupsSearch(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	n := startNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kcl := kafkaClient(t, n, false)
	adm := kadm.NewClient(kcl)
	for _, g := range []string{"orders-eu", "orders-us", "billing-orders", "Orders-caps", "payments"} {
		commit(ctx, t, adm, g, "t", 1)
	}
	joinWithProtocolType(ctx, t, kcl, "connect-orders", "connect")
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "orders-848", "m1", 60000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp, err := hb.RequestWith(ctx, kcl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ConsumerGroupHeartbeat: %v %+v", err, resp)
	}
	c := New(n, nil, nil)

	for _, tc := range []struct {
		query string
		want  string // the rows, in order
		count string
	}{
		{"?q=orders", "billing-orders connect-orders orders-848 orders-eu orders-us", "5 of 7 groups"},
		{"?q=orders&match=prefix", "orders-848 orders-eu orders-us", "3 of 7 groups"},
		{"?q=Orders", "Orders-caps", "1 of 7 groups"}, // ids are case-sensitive
		{"?q=ORDERS", "", "0 of 7 groups"},
		{"?q=rs-e&match=contains", "orders-eu", "1 of 7 groups"},
		{"?q=orders&type=consumer", "orders-848", "1 of 7 groups"},
		{"?ptype=connect", "connect-orders", "1 of 7 groups"},
		{"?ptype=consumer", "orders-848", "1 of 7 groups"},
		{"?ptype=Connect", "", "0 of 7 groups"}, // as the client spelled it
		{"?q=orders&state=Empty&desc=1", "orders-us orders-eu billing-orders", "3 of 7 groups"},
		{"?q=", "Orders-caps billing-orders connect-orders orders-848 orders-eu orders-us payments", "7 of 7 groups"},
	} {
		w := serveURL(c, "/console/"+tc.query, "", "")
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Errorf("%s: %d\n%s", tc.query, w.Code, body)
			continue
		}
		if got := strings.Join(shownGroups(body), " "); got != tc.want {
			t.Errorf("%s: shows %q, want %q", tc.query, got, tc.want)
		}
		if !strings.Contains(body, `id="count">`+tc.count) {
			t.Errorf("%s: the count does not read %q\n%s", tc.query, tc.count, body)
		}
	}

	// The form shows the search as applied, and the sort links keep it.
	body := serveURL(c, "/console/?q=orders&match=prefix&ptype=consumer", "", "").Body.String()
	for _, want := range []string{
		`name="q" value="orders"`,
		`<option value="prefix" selected>`,
		`<option value="consumer" selected>`,
		`<option value="connect">`, // a protocol type of the listed groups
		`href="?match=prefix&amp;ptype=consumer&amp;q=orders&amp;sort=members"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q\n%s", want, body)
		}
	}
	// A search that matches nothing says so, and offers the way back.
	if body := serveURL(c, "/console/?q=nothing-like-it", "", "").Body.String(); !strings.Contains(body, "No group matches") ||
		!strings.Contains(body, `href="/console/"`) {
		t.Errorf("an empty search result:\n%s", body)
	}

	// More matching groups than the page shows: the first ones, and the
	// page says the list is cut.
	maxGroupRows = 2
	body = serveURL(c, "/console/?q=orders", "", "").Body.String()
	if got := strings.Join(shownGroups(body), " "); got != "billing-orders connect-orders" {
		t.Errorf("cut to 2: shows %q", got)
	}
	if !strings.Contains(body, "the first 2 of 5 matching groups (7 groups)") {
		t.Errorf("cut to 2: the page does not say it shows 2 of the 5 matching\n%s", body)
	}
	maxGroupRows = 1000

	// Bounds: the query is user input.
	for _, q := range []string{
		"?q=" + strings.Repeat("x", maxSearchLen+1),
		"?ptype=" + strings.Repeat("x", maxSearchLen+1),
		"?q=%ff%fe",
		"?match=regexp",
		"?state=" + strings.Repeat("x", 1000),
		"?sort=" + strings.Repeat("x", 1000),
	} {
		w := serveURL(c, "/console/"+q, "", "")
		if w.Code != http.StatusBadRequest {
			t.Errorf("%.40s: %d, want 400", q, w.Code)
		}
		if strings.Contains(w.Body.String(), "xxxxxxxx") {
			t.Errorf("%.40s: the error page repeats the query", q)
		}
	}
	if w := serveURL(c, "/console/?q="+strings.Repeat("x", maxSearchLen), "", ""); w.Code != http.StatusOK {
		t.Errorf("a query of %d characters: %d, want 200", maxSearchLen, w.Code)
	}
}

// TestGroupsSearchEscapes: a query and a group id holding HTML and script
// are shown as text, in the form, the rows and the links.
func TestGroupsSearchEscapes(t *testing.T) {
	const evil = `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	n, _ := nodeWithGroup(t, "ops-"+evil, "t", 1)
	c := New(n, nil, nil)
	for _, q := range []string{evil, `<img src=x`, `ops-"`} {
		target := "/console/?" + url.Values{"q": {q}, "sort": {"state"}}.Encode()
		w := serveURL(c, target, "", "")
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Fatalf("q=%s: %d\n%s", q, w.Code, body)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("q=%s: markup of the query or the id reached the page unescaped\n%s", q, body)
		}
		if got := shownGroups(body); len(got) != 1 {
			t.Errorf("q=%s: shows %v, want the one group", q, got)
		}
		if !strings.Contains(body, "1 of 1 groups") {
			t.Errorf("q=%s: count\n%s", q, body)
		}
		// The form shows the query as typed, as text of its value.
		if !strings.Contains(body, `name="q" value="`+html.EscapeString(q)+`"`) {
			t.Errorf("q=%s: the search box does not hold the query, escaped\n%s", q, body)
		}
		if !strings.Contains(body, `&lt;script&gt;alert(1)&lt;/script&gt;`) {
			t.Errorf("q=%s: the id is not shown as text\n%s", q, body)
		}
	}
}

// TestGroupsSearchAuthorization: search looks only among the groups the
// viewer may describe (the node's ListGroups filters the others), so a
// viewer who may not describe a group neither sees it nor counts it,
// whatever the query; a viewer who may finds it; no credentials is still
// a 401.
func TestGroupsSearchAuthorization(t *testing.T) {
	n := startNode(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kcl := kafkaClient(t, n, true)
	adm := kadm.NewClient(kcl)
	commit(ctx, t, adm, "visible-app", "visible", 1)
	commit(ctx, t, adm, "secret-merger", "visible", 1)
	joinWithProtocolType(ctx, t, kcl, "secret-connect", "connect")
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	acls := kadm.NewACLs().Allow("User:alice").Groups("visible-app").Operations(kadm.OpDescribe)
	if res, err := adm.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	c := New(n, nil, nil)
	for _, q := range []string{"?q=secret", "?q=secret-merger&match=prefix", "?q=-", "?ptype=connect", "?q=e&state=Empty", "?q=secret&sort=members"} {
		w := serveURL(c, "/console/"+q, "alice", "alice-pw")
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Errorf("alice %s: %d\n%s", q, w.Code, body)
			continue
		}
		// The form repeats her query; no row or link names a hidden
		// group, and the form offers no protocol type of one.
		if strings.Contains(body, `data-group="secret`) || strings.Contains(body, "/console/groups/secret") ||
			!strings.Contains(q, "connect") && strings.Contains(body, `value="connect"`) {
			t.Errorf("alice %s: the page names a group she may not describe, or its protocol type\n%s", q, body)
		}
		// She may describe one group: every count is out of 1.
		if !regexp.MustCompile(`id="count">[01] of 1 groups`).MatchString(body) {
			t.Errorf("alice %s: the count is not out of her one group\n%s", q, body)
		}
	}
	if got := shownGroups(serveURL(c, "/console/?q=visible", "alice", "alice-pw").Body.String()); strings.Join(got, " ") != "visible-app" {
		t.Errorf("alice ?q=visible: %v", got)
	}
	w := serveURL(c, "/console/?q=secret", "admin", adminPassword)
	if got := strings.Join(shownGroups(w.Body.String()), " "); got != "secret-connect secret-merger" {
		t.Errorf("admin ?q=secret: %q", got)
	}
	for _, cred := range [][2]string{{"", ""}, {"alice", "wrong"}} {
		w := serveURL(c, "/console/?q=secret", cred[0], cred[1])
		if w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), "secret-") {
			t.Errorf("%q ?q=secret: %d, want 401 naming no group\n%s", cred[0], w.Code, w.Body)
		}
	}
}

// TestGroupsCountReadable: the count line of a node with many groups
// writes its numbers with thousands separators ("the first 1,000 of
// 90,000 matching groups (101,001 groups)").
func TestGroupsCountReadable(t *testing.T) {
	c := New(nil, nil, nil)
	for _, tc := range []struct {
		p    groupsPage
		want string
	}{
		{groupsPage{Groups: make([]GroupRow, 1000), Matching: 90000, Total: 101001, Query: groupsQuery{Search: "classic-"}},
			`id="count">the first 1,000 of 90,000 matching groups (101,001 groups): the list is cut`},
		{groupsPage{Groups: make([]GroupRow, 12), Matching: 12, Total: 101001, Filtered: true},
			`id="count">12 of 101,001 groups match</p>`},
	} {
		w := httptest.NewRecorder()
		c.render(w, "groups", http.StatusOK, pageData{Title: "Groups", Body: tc.p})
		if !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("the page lacks %q\n%s", tc.want, w.Body)
		}
	}
}

// TestGroupsSearchLengthAsTheBoxCounts: the server bounds q and ptype as
// the search box's maxlength does, in UTF-16 code units, not bytes: a
// search of maxSearchLen multi-byte characters, which the box lets a
// person type, finds the group whose id it is; one more character is a
// 400 that says the bound in those terms; a character beyond U+FFFF
// counts as two, as the box counts it. The box's maxlength is the bound.
func TestGroupsSearchLengthAsTheBoxCounts(t *testing.T) {
	cjk := strings.Repeat("日", maxSearchLen) // 3 bytes, 1 unit each
	n, _ := nodeWithGroup(t, cjk, "t", 1)
	c := New(n, nil, nil)
	get := func(param, v string) *httptest.ResponseRecorder {
		return serveURL(c, "/console/?"+url.Values{param: {v}}.Encode(), "", "")
	}
	w := get("q", cjk)
	if w.Code != http.StatusOK {
		t.Fatalf("q of %d characters (%d bytes): %d, want 200\n%s", maxSearchLen, len(cjk), w.Code, w.Body)
	}
	if got := shownGroups(w.Body.String()); len(got) != 1 || got[0] != cjk {
		t.Errorf("q of %d characters shows %q, want the group of that id", maxSearchLen, got)
	}
	if want := `maxlength="` + strconv.Itoa(maxSearchLen) + `"`; !strings.Contains(w.Body.String(), want) {
		t.Errorf("the search box has no %s", want)
	}
	for _, tc := range []struct {
		v    string
		code int
		says string
	}{
		{strings.Repeat("é", maxSearchLen), http.StatusOK, ""},
		{strings.Repeat("😀", maxSearchLen/2), http.StatusOK, ""}, // 2 units, 4 bytes each
		{cjk + "日", http.StatusBadRequest, fmt.Sprintf("is %d characters long: at most %d", maxSearchLen+1, maxSearchLen)},
		{strings.Repeat("😀", maxSearchLen/2) + "x", http.StatusBadRequest,
			fmt.Sprintf("is %d characters long: at most %d, counted as the search box counts them (a character beyond U&#43;FFFF, such as an emoji, counts as two)", maxSearchLen+1, maxSearchLen)},
	} {
		for _, param := range []string{"q", "ptype"} {
			w := get(param, tc.v)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.says) {
				t.Errorf("%s of %d runes, %d bytes: %d, want %d saying %q\n%s", param, utf8.RuneCountInString(tc.v), len(tc.v),
					w.Code, tc.code, tc.says, w.Body)
			}
			if tc.code != http.StatusOK && strings.Contains(w.Body.String(), "日日") {
				t.Errorf("%s: the error page repeats the query", param)
			}
		}
	}
}
