package console

import (
	"net/http"
	"strings"
	"testing"
)

// TestGroupsFilterRejectsUnknownValues: an unknown ?state= or ?type= on the
// groups page is a 400 naming the accepted values (it showed "0 of N
// groups", as if no group were in that state); a known one in another case
// filters and is selected in the form.
func TestGroupsFilterRejectsUnknownValues(t *testing.T) {
	_, base := nodeWithGroup(t, "filter-app", "filtered", 1)

	code, body := get(t, base+"?state=bogus", "", "")
	if code != http.StatusBadRequest {
		t.Errorf("state=bogus: %d, want 400\n%s", code, body)
	}
	for _, want := range []string{"&#34;bogus&#34;", "Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"} {
		if !strings.Contains(body, want) {
			t.Errorf("state=bogus: the page lacks %q\n%s", want, body)
		}
	}
	code, body = get(t, base+"?type=klassic", "", "")
	if code != http.StatusBadRequest || !strings.Contains(body, "classic, consumer") {
		t.Errorf("type=klassic: %d, want 400 naming classic and consumer\n%s", code, body)
	}
	code, body = get(t, base+"?state=empty&type=CLASSIC", "", "")
	if code != http.StatusOK || !strings.Contains(body, "1 of 1 groups") ||
		!strings.Contains(body, `<option value="Empty" selected>`) || !strings.Contains(body, `<option value="classic" selected>`) {
		t.Errorf("state=empty&type=CLASSIC: %d, want the group, Empty and classic selected\n%s", code, body)
	}
}
