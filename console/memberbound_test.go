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

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
)

// TestClassicMembersBounded: the groups page learns how many members a
// classic group has without receiving them, and a group page receives no
// more members than it lists. Both ask the node for a bounded number of
// members per group (group.MembersTag: 0 for the groups page, maxMemberRows
// for a group page) and read the count the node then gives. Before, both
// received every member with its metadata and assignment: the groups page
// only to count them (len(d.Members)), which for a few groups of thousands
// of members was tens or hundreds of megabytes per page view.
func TestClassicMembersBounded(t *testing.T) {
	defer func(m int) { maxMemberRows = m }(maxMemberRows)
	maxMemberRows = 4
	const (
		members = 7
		size    = 16 << 10 // bytes of each member's metadata and of its assignment
	)
	// What each DescribeGroups of the console asked for and got.
	type described struct {
		bounded         bool
		maxMembers      int32
		members, counts []int // per classic group answered: listed, counted (-1: no count)
		bytes           int
	}
	var mu sync.Mutex
	var seen []described
	n := startNode(t, false, func(c *node.Config) {
		// Every member joins within the first generation.
		c.Group.InitialRebalanceDelay = time.Second
		c.Tap = func(_ server.Client, req kmsg.Request, resp kmsg.Response) {
			d, ok := req.(*kmsg.DescribeGroupsRequest)
			if !ok {
				return
			}
			var s described
			s.maxMembers, s.bounded = group.MembersRequested(d)
			r := resp.(*kmsg.DescribeGroupsResponse)
			s.bytes = len(r.AppendTo(nil))
			for i := range r.Groups {
				if r.Groups[i].ProtocolType != "blob" {
					continue
				}
				c, ok := group.MemberCountOf(&r.Groups[i])
				if !ok {
					c = -1
				}
				s.members = append(s.members, len(r.Groups[i].Members))
				s.counts = append(s.counts, c)
			}
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kcl := kafkaClient(t, n, false)
	joinClassic(ctx, t, n, "fat", members, size)
	take := func() []described {
		mu.Lock()
		defer mu.Unlock()
		s := seen
		seen = nil
		return s
	}
	// Every member with its metadata and assignment, as a stock client
	// asks: what the pages received before.
	plain := kmsg.NewPtrDescribeGroupsRequest()
	plain.Groups = []string{"fat"}
	if resp, err := plain.RequestWith(ctx, kcl); err != nil || len(resp.Groups) != 1 || len(resp.Groups[0].Members) != members {
		t.Fatalf("DescribeGroups without the tag: %v %+v", err, resp)
	}
	all := take()
	if len(all) != 1 || all[0].bounded || all[0].counts[0] != -1 || all[0].bytes < members*2*size {
		t.Fatalf("a stock DescribeGroups: %+v, want every member (%d bytes or more) and no count", all, members*2*size)
	}
	full := all[0].bytes

	base := "http://" + n.HTTPAddr() + "/console/"
	code, body := get(t, base, "", "")
	if code != http.StatusOK {
		t.Fatalf("groups page: %d %s", code, body)
	}
	row := regexp.MustCompile(`(?s)<tr data-group="fat".*?</tr>`).FindString(body)
	if !strings.Contains(row, fmt.Sprintf(`<td class="num">%d</td>`, members)) {
		t.Errorf("the groups page does not show the %d members of fat: %s", members, row)
	}
	got := take()
	if len(got) == 0 {
		t.Fatal("the groups page sent no DescribeGroups")
	}
	for _, d := range got {
		if !d.bounded || d.maxMembers != 0 {
			t.Errorf("the groups page asked for %d members (%v), want 0", d.maxMembers, d.bounded)
		}
		if fmt.Sprint(d.members, d.counts) != fmt.Sprint([]int{0}, []int{members}) {
			t.Errorf("the groups page received %v members, counted %v; want none, counted %d", d.members, d.counts, members)
		}
		if d.bytes > full/20 {
			t.Errorf("the groups page's DescribeGroups answer is %d bytes, the members alone are %d", d.bytes, full)
		}
	}

	code, body = get(t, base+"groups/fat", "", "")
	if code != http.StatusOK {
		t.Fatalf("group page: %d %s", code, body)
	}
	if got := strings.Count(body, "<td title="); got != maxMemberRows {
		t.Errorf("members listed: %d, want %d", got, maxMemberRows)
	}
	if !strings.Contains(body, fmt.Sprintf(`<dd id="member-count">%d</dd>`, members)) || !strings.Contains(body, fmt.Sprintf("… and %d more members", members-maxMemberRows)) {
		t.Errorf("the group page does not count the %d members and the %d not listed", members, members-maxMemberRows)
	}
	if !strings.Contains(body, fmt.Sprintf("%d bytes (not a consumer assignment)", size)) {
		t.Errorf("the group page does not give the members' assignment size")
	}
	for _, d := range take() {
		if !d.bounded || d.maxMembers != int32(maxMemberRows) {
			t.Errorf("the group page asked for %d members (%v), want %d", d.maxMembers, d.bounded, maxMemberRows)
		}
		if fmt.Sprint(d.members, d.counts) != fmt.Sprint([]int{maxMemberRows}, []int{members}) {
			t.Errorf("the group page received %v members, counted %v; want %d, counted %d", d.members, d.counts, maxMemberRows, members)
		}
	}
}

// joinClassic forms classic group grp (protocol type "blob") of n members
// with metadata and assignments of size bytes each, and leaves it Stable.
// The node's initial rebalance delay must let every member into the first
// generation.
func joinClassic(ctx context.Context, t *testing.T, nd *node.Node, grp string, n, size int) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		// A client each: a node answers a connection's requests in order,
		// and a JoinGroup waits for the others.
		cl := kafkaClient(t, nd, false)
		wg.Go(func() {
			errs <- func() error {
				j := kmsg.NewPtrJoinGroupRequest()
				j.Group, j.ProtocolType = grp, "blob"
				j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 60000, 60000
				j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "big", Metadata: make([]byte, size)}}
				j.Reason = kmsg.StringPtr(fmt.Sprint("member ", i))
				jr, err := j.RequestWith(ctx, cl)
				if err == nil && jr.ErrorCode == kerr.MemberIDRequired.Code {
					j.MemberID = jr.MemberID
					jr, err = j.RequestWith(ctx, cl)
				}
				if err == nil {
					err = kerr.ErrorForCode(jr.ErrorCode)
				}
				if err != nil {
					return fmt.Errorf("JoinGroup: %w", err)
				}
				s := kmsg.NewPtrSyncGroupRequest()
				s.Group, s.MemberID, s.Generation = grp, jr.MemberID, jr.Generation
				s.ProtocolType, s.Protocol = kmsg.StringPtr("blob"), kmsg.StringPtr("big")
				if jr.MemberID == jr.LeaderID {
					if len(jr.Members) != n {
						return fmt.Errorf("the leader was given %d members, want %d", len(jr.Members), n)
					}
					for _, m := range jr.Members {
						s.GroupAssignment = append(s.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: make([]byte, size)})
					}
				}
				sr, err := s.RequestWith(ctx, cl)
				if err == nil {
					err = kerr.ErrorForCode(sr.ErrorCode)
				}
				if err != nil {
					return fmt.Errorf("SyncGroup: %w", err)
				}
				return nil
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
