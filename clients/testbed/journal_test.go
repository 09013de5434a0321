package testbed

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCheckFetchesSeeCommits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tp := TP{"t", 0}
	commit := func(off int64, sent, acked int) Commit {
		return Commit{TP: tp, Offset: off, Gen: 1, Member: "m", Requested: at(sent), At: at(acked)}
	}
	fetch := func(off int64, sent, answered int) Fetch {
		return Fetch{TP: tp, Offset: off, Requested: at(sent), At: at(answered)}
	}
	for _, c := range []struct {
		name    string
		sent    []Commit // requests (acknowledged or not)
		acked   []Commit
		fetches []Fetch
		ok      bool
	}{
		{"sees the last acknowledged commit", []Commit{commit(10, 0, 1), commit(20, 2, 3)}, []Commit{commit(10, 0, 1), commit(20, 2, 3)}, []Fetch{fetch(20, 4, 5)}, true},
		{"older value than acknowledged", []Commit{commit(10, 0, 1), commit(20, 2, 3)}, []Commit{commit(10, 0, 1), commit(20, 2, 3)}, []Fetch{fetch(10, 4, 5)}, false},
		{"nothing committed yet", nil, nil, []Fetch{fetch(-1, 0, 1)}, true},
		{"fetch before the commit was acknowledged", []Commit{commit(10, 0, 6)}, []Commit{commit(10, 0, 6)}, []Fetch{fetch(-1, 2, 3)}, true},
		{"a commit racing the fetch", []Commit{commit(10, 0, 1), commit(30, 3, 8)}, []Commit{commit(10, 0, 1), commit(30, 3, 8)}, []Fetch{fetch(30, 4, 5)}, true},
		{"a commit whose answer was lost", []Commit{commit(10, 0, 1), commit(40, 3, 0)}, []Commit{commit(10, 0, 1)}, []Fetch{fetch(40, 4, 5)}, true},
		{"a value nobody committed", []Commit{commit(10, 0, 1)}, []Commit{commit(10, 0, 1)}, []Fetch{fetch(7, 4, 5)}, false},
		{"a commit sent after the fetch was answered", []Commit{commit(10, 0, 1), commit(50, 6, 7)}, []Commit{commit(10, 0, 1), commit(50, 6, 7)}, []Fetch{fetch(50, 4, 5)}, false},
		// 16 was answered after 500 was sent (another connection): cohort
		// may have applied it last.
		{"a commit overlapping the last acknowledged one", []Commit{commit(16, 1, 3), commit(500, 2, 4)}, []Commit{commit(16, 1, 3), commit(500, 2, 4)}, []Fetch{fetch(16, 5, 6)}, true},
		// 16 was answered before 500 was sent: superseded.
		{"a commit acknowledged before the last one was sent", []Commit{commit(16, 0, 1), commit(500, 2, 3)}, []Commit{commit(16, 0, 1), commit(500, 2, 3)}, []Fetch{fetch(16, 5, 6)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := NewJournal()
			j.sent["g"], j.commits["g"], j.fetches["g"] = c.sent, c.acked, c.fetches
			err := j.CheckFetchesSeeCommits("g")
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok = %v", err, c.ok)
			}
		})
	}
}

func TestBackwardsCommits(t *testing.T) {
	tp := TP{"t", 0}
	j := NewJournal()
	j.commits["g"] = []Commit{
		{TP: tp, Offset: 30, Gen: 3, Member: "a"},
		{TP: tp, Offset: 29, Gen: 4, Member: "b"},
		{TP: tp, Offset: 40, Gen: 4, Member: "b"},
	}
	if notes := j.BackwardsCommits("g", false); len(notes) != 1 {
		t.Fatalf("notes %v, want the one backwards commit", notes)
	}
}

func TestCheckCommitFencing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tp := TP{"t", 0}
	j := NewJournal()
	j.joins["g"] = []Join{{Gen: 6, Member: "a", At: at(0)}, {Gen: 7, Member: "a", At: at(10)}, {Gen: 7, Member: "b", At: at(11)}}
	j.commits["g"] = []Commit{
		{TP: tp, Offset: 1, Gen: 6, Member: "a", Requested: at(5), At: at(12)}, // sent before gen 7 began
		{TP: tp, Offset: 2, Gen: -1, Requested: at(20), At: at(21)},            // simple commit
		{TP: tp, Offset: 3, Gen: 7, Member: "a", Requested: at(30), At: at(31)},
	}
	if err := j.CheckCommitFencing("g"); err != nil {
		t.Fatal(err)
	}
	j.commits["g"] = append(j.commits["g"], Commit{TP: tp, Offset: 4, Gen: 6, Member: "b", Requested: at(15), At: at(16)})
	if err := j.CheckCommitFencing("g"); err == nil {
		t.Fatal("a commit of generation 6 sent after generation 7 began was not reported")
	}
}

// TestCheckCoverage: a settled eager generation must give out every
// partition; an unsettled one (a member joined but never synced) and a
// cooperative one need not.
func TestCheckCoverage(t *testing.T) {
	want := []TP{{"t", 0}, {"t", 1}, {"t", 2}}
	now := time.Now()
	join := func(j *Journal, client, member string, gen int32, protocol string) {
		j.Observe(client, &kmsg.JoinGroupRequest{Group: "g", ProtocolType: "consumer"},
			&kmsg.JoinGroupResponse{Generation: gen, MemberID: member, Protocol: &protocol}, now, now)
	}
	sync := func(j *Journal, member string, gen int32, parts ...int32) {
		a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: parts}}}
		j.Observe("", &kmsg.SyncGroupRequest{Group: "g", Generation: gen, MemberID: member},
			&kmsg.SyncGroupResponse{MemberAssignment: a.AppendTo(nil)}, now, now)
	}
	j := NewJournal()
	join(j, "c1", "a", 1, "range")
	join(j, "c2", "b", 1, "range")
	sync(j, "a", 1, 0, 1)
	if j.Settled("g", 1) {
		t.Fatal("generation 1 settled before b synced")
	}
	if err := j.CheckCoverage("g", want); err != nil {
		t.Fatalf("an unsettled generation was checked: %v", err)
	}
	sync(j, "b", 1)
	if err := j.CheckCoverage("g", want); err == nil {
		t.Fatal("t/2 given to no one in a settled eager generation: not reported")
	}
	if j.MemberOf("g", "c2") != "b" || j.MemberOf("g", "c3") != "" {
		t.Fatalf("MemberOf: c2 → %q, c3 → %q", j.MemberOf("g", "c2"), j.MemberOf("g", "c3"))
	}

	j = NewJournal()
	join(j, "c1", "a", 1, "cooperative-sticky")
	sync(j, "a", 1, 0)
	if err := j.CheckCoverage("g", want); err != nil {
		t.Fatalf("a cooperative generation was checked: %v", err)
	}
	join(j, "c1", "a", 2, "cooperative-sticky")
	sync(j, "a", 2, 0, 1, 2)
	if !j.Covers("g", 2, want) || j.Covers("g", 1, want) {
		t.Fatal("Covers: want generation 2 only")
	}
}
