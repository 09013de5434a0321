package console

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
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
	// The DescribeGroups the console sends, by how many groups each names.
	var mu sync.Mutex
	var described []int
	n := startNode(t, false, func(c *node.Config) {
		c.Tap = func(_ server.Client, req kmsg.Request, _ kmsg.Response) {
			if d, ok := req.(*kmsg.DescribeGroupsRequest); ok {
				mu.Lock()
				described = append(described, len(d.Groups))
				mu.Unlock()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, n, false))
	for i := range 5 {
		commit(ctx, t, adm, fmt.Sprintf("g%d", i), "t", 1)
	}
	base := "http://" + n.HTTPAddr() + "/console/"
	shown := regexp.MustCompile(`<tr data-group="([^"]+)"`)
	for _, tc := range []struct {
		query     string
		want      []string
		described string // the DescribeGroups sent, by the groups each names
	}{
		{"", []string{"g0", "g1", "g2"}, "[2 1]"},                          // only those shown
		{"?desc=1", []string{"g4", "g3", "g2"}, "[2 1]"},                   // the same
		{"?sort=generation&desc=1", []string{"g4", "g3", "g2"}, "[2 2 1]"}, // every group, then cut
		{"?sort=members", []string{"g0", "g1", "g2"}, "[2 2 1]"},           // the same
		{"?sort=STATE&type=classic", []string{"g0", "g1", "g2"}, "[2 1]"},  // the list alone sorts
	} {
		mu.Lock()
		described = nil
		mu.Unlock()
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
		mu.Lock()
		if got := fmt.Sprint(described); got != tc.described {
			t.Errorf("%s: DescribeGroups of %s groups, want %s", tc.query, got, tc.described)
		}
		mu.Unlock()
		if !strings.Contains(body, "the first 3 of 5 matching groups (5 groups)") {
			t.Errorf("%s: the page does not say it shows 3 of 5", tc.query)
		}
		// Each shown group was described: its generation is known (0
		// beside its 0 members; "—" for a group not described).
		if got := strings.Count(body, `<td class="num">0</td>`); got != 2*len(tc.want) {
			t.Errorf("%s: %d zero cells, want %d (members and generation of each shown group)", tc.query, got, 2*len(tc.want))
		}
	}
	// An order the page does not know is refused, not a description of
	// every group sorted by name.
	if code, body := get(t, base+"?sort=bogus", "", ""); code != http.StatusBadRequest || !strings.Contains(body, "generation") {
		t.Errorf("sort=bogus: %d, want 400 naming the orders", code)
	}
	// Narrowed to what fits: the usual count.
	if _, body := get(t, base+"?state=Empty", "", ""); !strings.Contains(body, "the first 3 of 5 matching") {
		t.Errorf("state=Empty: all five are Empty")
	}
}
