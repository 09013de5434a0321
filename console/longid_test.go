package console

import (
	"net/http"
	"strings"
	"testing"
)

// TestGroupIDLongerThanTheProtocolCarries: a group id of more bytes than a
// Kafka string holds (32,767), in the path or in ?id=, is a 400 that says
// so, without asking the node and without repeating the id. The console
// sent it on, the node refused the request and closed the connection, and
// the page was a 502 asking whether SASL was missing, quoting 40 KB of id.
// An id at the limit is still asked for.
func TestGroupIDLongerThanTheProtocolCarries(t *testing.T) {
	n := startNode(t, false)
	long := strings.Repeat("x", 32768)
	for _, p := range []string{"/console/groups/" + long, "/console/groups/?id=" + long} {
		code, body := get(t, "http://"+n.HTTPAddr()+p, "", "")
		if code != http.StatusBadRequest {
			t.Errorf("%.30s…: %d, want 400: %.300s", p, code, body)
		}
		if !strings.Contains(body, "32768 bytes") || !strings.Contains(body, "32767") {
			t.Errorf("%.30s…: the page does not say how long the id is and how long it may be: %.300s", p, body)
		}
		if strings.Contains(body, strings.Repeat("x", 100)) {
			t.Errorf("%.30s…: the page repeats the id (%d bytes)", p, len(body))
		}
	}
	code, body := get(t, "http://"+n.HTTPAddr()+"/console/groups/"+long[1:], "", "")
	if code != http.StatusNotFound {
		t.Errorf("an id of 32767 bytes: %d, want 404 (no such group): %.300s", code, body)
	}
}
