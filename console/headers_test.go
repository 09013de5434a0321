package console

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConsoleCacheControl: every console page, the error pages and the
// authentication prompt included, is sent with Cache-Control: no-store
// (none was sent); the static assets may be cached; a directory under
// static/ is a 404, not a listing of the assets.
func TestConsoleCacheControl(t *testing.T) {
	n := startNode(t, true)
	base := "http://" + n.HTTPAddr() + "/console/"
	cl := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fetch := func(path, user, pass string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct {
		path, user string
		code       int
	}{
		{"", "admin", http.StatusOK},
		{"topics", "admin", http.StatusOK},
		{"groups/nobody", "admin", http.StatusNotFound},
		{"groups/", "admin", http.StatusFound},
		{"nowhere", "admin", http.StatusNotFound},
		{"", "", http.StatusUnauthorized},
	} {
		resp, body := fetch(tc.path, tc.user, adminPassword)
		if resp.StatusCode != tc.code {
			t.Errorf("/console/%s: %d, want %d\n%s", tc.path, resp.StatusCode, tc.code, body)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("/console/%s: Cache-Control %q, want no-store", tc.path, got)
		}
	}
	resp, _ := fetch("static/console.css", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age") {
		t.Errorf("static/console.css: %d, Cache-Control %q; want 200 with a max-age", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	for _, path := range []string{"static/", "static/console.css/", "static/nothing.js"} {
		resp, body := fetch(path, "", "")
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, `href="console.js"`) {
			t.Errorf("%s: %d, want 404 without a listing\n%s", path, resp.StatusCode, body)
		}
	}
}
