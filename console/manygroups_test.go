package console

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestGroupsPageBounded: the groups page shows at most maxGroupRows groups
// (the first in the order asked for) and says how many match, and it
// describes groups in batches of describeBatch. Before, it described every
// group in one request and listed them all: past the node's 100,000
// entries a request may hold the page failed for good, and well before it
// took seconds and megabytes.
func TestGroupsPageBounded(t *testing.T) {
	defer func(rows, batch int) { maxGroupRows, describeBatch = rows, batch }(maxGroupRows, describeBatch)
	maxGroupRows, describeBatch = 3, 2
	n := startNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, n, false))
	for i := range 5 {
		commit(ctx, t, adm, fmt.Sprintf("g%d", i), "t", 1)
	}
	base := "http://" + n.HTTPAddr() + "/console/"
	shown := regexp.MustCompile(`<tr data-group="([^"]+)"`)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"g0", "g1", "g2"}},
		{"?desc=1", []string{"g4", "g3", "g2"}},
		{"?sort=generation&desc=1", []string{"g4", "g3", "g2"}}, // every group described (in 3 batches), then cut
		{"?sort=members", []string{"g0", "g1", "g2"}},
	} {
		code, body := get(t, base+tc.query, "", "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.query, code, body)
		}
		var got []string
		for _, m := range shown.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: shows %v, want %v", tc.query, got, tc.want)
		}
		if !strings.Contains(body, "the first 3 of 5 matching groups (5 groups)") {
			t.Errorf("%s: the page does not say it shows 3 of 5", tc.query)
		}
		// Each shown group was described: its generation is known (0
		// beside its 0 members; "—" for a group not described).
		if got := strings.Count(body, `<td class="num">0</td>`); got != 2*len(tc.want) {
			t.Errorf("%s: %d zero cells, want %d (members and generation of each shown group)", tc.query, got, 2*len(tc.want))
		}
	}
	// Narrowed to what fits: the usual count.
	if _, body := get(t, base+"?state=Empty", "", ""); !strings.Contains(body, "the first 3 of 5 matching") {
		t.Errorf("state=Empty: all five are Empty")
	}
}
