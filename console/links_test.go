package console

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGroupLinkIsOnePathSegment: the groups page links a group whose id
// holds a space, '/', '?' and '#' with the id escaped as one path segment,
// and that link opens the group's page (unescaped, the link went to
// "team a" with the query "c" and fragment "d": a 404).
func TestGroupLinkIsOnePathSegment(t *testing.T) {
	_, base := nodeWithGroup(t, "team a/b?c#d", "odd", 1)
	code, body := get(t, base, "", "")
	if code != http.StatusOK {
		t.Fatalf("groups page: %d %s", code, body)
	}
	const link = `href="/console/groups/team%20a%2Fb%3Fc%23d"`
	if !strings.Contains(body, link) {
		i := strings.Index(body, `href="/console/groups/`)
		t.Fatalf("groups page lacks %s; it has %.60s", link, body[max(i, 0):])
	}
	code, body = get(t, base+"groups/team%20a%2Fb%3Fc%23d", "", "")
	if code != http.StatusOK || !strings.Contains(body, "<td>odd</td>") || !strings.Contains(body, "team a/b?c#d") {
		t.Errorf("the linked group page: %d\n%s", code, body)
	}
}

// TestGroupsPathWithoutID: /console/groups/ (and /console/groups) with no
// group id redirect to the groups list; they answered 502 Bad Gateway
// (INVALID_GROUP_ID), as if the node had failed.
func TestGroupsPathWithoutID(t *testing.T) {
	n := startNode(t, false)
	cl := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/console/groups/", "/console/groups"} {
		resp, err := cl.Get("http://" + n.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
			t.Errorf("%s: %d, Location %q; want 302 to /console/", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}
