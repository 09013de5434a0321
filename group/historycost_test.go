package group

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// historySetting configures a benchmark's shard: history "on" (the
// default), "off" (HistorySize < 0, no observer), or "counted": off, with an
// observer that counts the rebalances, as a node with metrics has.
func historySetting(c *Config, hist string) {
	switch hist {
	case "off":
		c.HistorySize = -1
	case "counted":
		c.HistorySize = -1
		var n int
		c.OnRebalance = func(RebalanceEvent) { n++ }
	}
}

// BenchmarkClassicRebalanceHistory measures one rebalance of a classic
// consumer group of n members (every member rejoins, the leader assigns
// each member 10 partitions, shifted by one member from the last
// generation so that every assignment changes, every member syncs), with
// the rebalance history on (the default), off, and off but counted for the
// metrics: the differences are what recording the event, and counting it
// without a history, cost the shard's goroutine.
func BenchmarkClassicRebalanceHistory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, hist := range []string{"on", "off", "counted"} {
			b.Run(fmt.Sprintf("members=%d/history=%s", n, hist), func(b *testing.B) {
				h := newH(b, func(c *Config) { historySetting(c, hist) })
				meta := protos("range", consumerMeta("t"))
				ids, leader, gen := h.joinMany("g", n, meta)
				sorted := slices.Sorted(slices.Values(ids))
				assignments := func(shift int) map[string]string {
					out := make(map[string]string, n)
					for i, id := range sorted {
						a := kmsg.NewConsumerMemberAssignment()
						at := kmsg.NewConsumerMemberAssignmentTopic()
						at.Topic = "t"
						for p := range 10 {
							at.Partitions = append(at.Partitions, int32(((i+shift)%n)*10+p))
						}
						a.Topics = append(a.Topics, at)
						out[id] = string(a.AppendTo(nil))
					}
					return out
				}
				round := func(shift int) {
					var ts []Ticket
					for _, id := range ids {
						if id != leader {
							ts = append(ts, h.sync("g", id, gen, nil))
						}
					}
					ts = append(ts, h.sync("g", leader, gen, assignments(shift)))
					for _, tk := range ts {
						if c := h.syncResp(tk).ErrorCode; c != 0 {
							b.Fatalf("sync: error %d", c)
						}
					}
				}
				round(0)
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					as := assignments(i + 1)
					b.StartTimer()
					var ts []Ticket
					for _, id := range ids {
						ts = append(ts, h.join("g", jo{member: id, protos: meta}))
					}
					r := h.joinResp(ts[0])
					if r.ErrorCode != 0 {
						b.Fatalf("rejoin: %d", r.ErrorCode)
					}
					leader, gen = r.LeaderID, r.Generation
					ts = ts[:0]
					for _, id := range ids {
						if id != leader {
							ts = append(ts, h.sync("g", id, gen, nil))
						}
					}
					ts = append(ts, h.sync("g", leader, gen, as))
					for _, tk := range ts {
						if c := h.syncResp(tk).ErrorCode; c != 0 {
							b.Fatalf("sync: error %d", c)
						}
					}
				}
			})
		}
	}
}

// BenchmarkConsumerRebalanceHistory measures one rebalance of a KIP-848
// consumer group of n members (4 partitions each): one member leaves and
// joins again, every member heartbeats until the group is Stable again,
// with the rebalance history on and off.
func BenchmarkConsumerRebalanceHistory(b *testing.B) {
	for _, n := range []int{1000, 2000} {
		for _, hist := range []string{"on", "off", "counted"} {
			b.Run(fmt.Sprintf("members=%d/history=%s", n, hist), func(b *testing.B) {
				h, _ := newCH(b, map[string]int32{"t": int32(4 * n)}, func(c *Config) { historySetting(c, hist) })
				ids := make([]string, n)
				for i := range ids {
					ids[i] = fmt.Sprintf("m%05d", i)
					h.cgJoin(ids[i], "t")
				}
				h.cgSettle(ids...)
				b.ResetTimer()
				for range b.N {
					h.cg(hb{member: ids[0], epoch: -1})
					h.cgJoin(ids[0], "t")
					h.cgSettle(ids...)
				}
			})
		}
	}
}
