package console

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestDotGroupIDsHaveWorkingLinks: groups named "." and ".." are linked
// from the groups page with the id in the query, and those links open
// their pages. As path segments, plain or as %2E (a browser reads it as a
// dot too), the links resolved to /console/ and showed the list.
func TestDotGroupIDsHaveWorkingLinks(t *testing.T) {
	n, base := nodeWithGroup(t, ".", "dot", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commit(ctx, t, kadm.NewClient(kafkaClient(t, n, false)), "..", "dotdot", 1)
	_, body := get(t, base, "", "")
	for id, topic := range map[string]string{".": "dot", "..": "dotdot"} {
		href := regexp.MustCompile(`<a href="([^"]*)">` + regexp.QuoteMeta(id) + `</a>`).FindStringSubmatch(body)
		if href == nil {
			t.Fatalf("groups page has no link for %q:\n%s", id, body)
		}
		// Resolve the link as a browser does (Go's resolver removes
		// dot segments as the URL standard says, unescaped ones).
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := url.Parse(html.UnescapeString(href[1]))
		if err != nil {
			t.Fatal(err)
		}
		target := u.ResolveReference(ref)
		if strings.Contains(target.EscapedPath(), "%2E") || strings.Contains(target.EscapedPath(), "%2e") {
			t.Errorf("%q: link %s has an escaped dot segment, which browsers resolve as a dot", id, href[1])
		}
		code, page := get(t, target.String(), "", "")
		if code != http.StatusOK || !strings.Contains(page, "<td>"+topic+"</td>") {
			t.Errorf("%q: link %s (%s) opens %d without its offsets\n%s", id, href[1], target, code, page)
		}
	}
}
