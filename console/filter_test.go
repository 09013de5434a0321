package console

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/group"
)

// TestGroupsFilterRejectsUnknownValues: an unknown ?state= or ?type= on the
// groups page is a 400 naming the accepted values (it showed "0 of N
// groups", as if no group were in that state), Dead among the unknown, as
// for cohort groups --state; a known one in another case filters and is
// selected in the form.
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
	// Dead is no state a listed group has (ListGroups leaves a group
	// being removed out): refused, as cohort groups --state dead is, with
	// the same list of states.
	code, body = get(t, base+"?state=Dead", "", "")
	if want := html.EscapeString(`want one of ` + strings.Join(group.ListedStates(), ", ")); code != http.StatusBadRequest || !strings.Contains(body, want) {
		t.Errorf("state=Dead: %d, want 400 with %q\n%s", code, want, body)
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
