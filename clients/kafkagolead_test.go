package clients

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/server"
)

// kafkaGoUnreadable is what kafka-go (v0.4.51, ConsumerGroup) says when,
// elected leader of a classic group, it cannot read a member's
// subscription: it reads each with the version-0 layout (version, topics,
// user data) and fails its join if bytes are left over, which they are in
// the subscriptions of the libraries that write the later fields (owned
// partitions, generation, rack). cohort hands the leader the subscriptions
// byte for byte, as Kafka does; docs/compatibility.md.
const kafkaGoUnreadable = "unable to read metadata for member, "

// kafkaGoLeads bounds kafka-go's kafkaGoUnreadable lines by what the node
// answered it: each such line must name a member whose subscription the
// node handed kafka-go, as leader, in a JoinGroup answer, and kafka-go
// must not print more of them than it had such answers (it stops at the
// first subscription it cannot read, one line per failed join). A run in
// which cohort mangled a subscription, or handed one to kafka-go that
// reads cleanly, fails; a legitimate run cannot exceed the bound.
type kafkaGoLeads struct {
	clientID string

	mu         sync.Mutex
	leads      int             // answers leading with a subscription kafka-go cannot read
	unreadable map[string]bool // the member ids of those subscriptions
}

func newKafkaGoLeads(clientID string) *kafkaGoLeads {
	return &kafkaGoLeads{clientID: clientID, unreadable: map[string]bool{}}
}

// observe is a testbed.Bare OnAnswered function.
func (k *kafkaGoLeads) observe(cl server.Client, _ kmsg.Request, resp kmsg.Response) {
	j, ok := resp.(*kmsg.JoinGroupResponse)
	if !ok || cl.ID != k.clientID || j.ErrorCode != 0 || j.LeaderID != j.MemberID {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	led := false
	for _, m := range j.Members {
		if !kafkaGoReadable(m.ProtocolMetadata) {
			k.unreadable[m.MemberID] = true
			led = true
		}
	}
	if led {
		k.leads++
	}
}

// explains reports whether line is one check bounds.
func (k *kafkaGoLeads) explains(line string) bool { return strings.Contains(line, kafkaGoUnreadable) }

// check checks kafka-go's error lines (all of them; the others are
// ignored) against the answers observed.
func (k *kafkaGoLeads) check(lines []string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, line := range lines {
		_, rest, ok := strings.Cut(line, kafkaGoUnreadable)
		if !ok {
			continue
		}
		n++
		member, _, _ := strings.Cut(rest, ":")
		if !k.unreadable[member] {
			return fmt.Errorf("kafka-go could not read the subscription of member %q, which the node never handed it as leader with bytes past the version-0 layout: %s", member, line)
		}
	}
	if n > k.leads {
		return fmt.Errorf("kafka-go printed %d times that it could not read a subscription, but led only %d generations with one it cannot read", n, k.leads)
	}
	return nil
}

// kafkaGoReadable reports whether kafka-go v0.4.51 reads a consumer
// subscription without error and without bytes left over: int16 version,
// an int32-counted array of int16-length strings, int32-length user data
// (a negative length reads as empty, as kafka-go does).
func kafkaGoReadable(b []byte) bool {
	take := func(n int) bool {
		if n > len(b) {
			return false
		}
		b = b[n:]
		return true
	}
	length := func(size int) (int, bool) {
		if len(b) < size {
			return 0, false
		}
		var n int
		if size == 2 {
			n = int(int16(binary.BigEndian.Uint16(b)))
		} else {
			n = int(int32(binary.BigEndian.Uint32(b)))
		}
		b = b[size:]
		return max(n, 0), true
	}
	if !take(2) {
		return false
	}
	topics, ok := length(4)
	if !ok {
		return false
	}
	for range topics {
		if n, ok := length(2); !ok || !take(n) {
			return false
		}
	}
	if n, ok := length(4); !ok || !take(n) {
		return false
	}
	return len(b) == 0
}

// TestKafkaGoLeadsBound: the check of kafka-go's unreadable-subscription
// lines passes for lines that answers explain and fails otherwise.
func TestKafkaGoLeadsBound(t *testing.T) {
	v0 := kmsg.NewConsumerMemberMetadata()
	v0.Version, v0.Topics = 0, []string{"jobs"}
	v1 := kmsg.NewConsumerMemberMetadata()
	v1.Version, v1.Topics = 1, []string{"jobs"}
	v1.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "jobs", Partitions: []int32{0}}}
	if !kafkaGoReadable(v0.AppendTo(nil)) || kafkaGoReadable(v1.AppendTo(nil)) || kafkaGoReadable(v0.AppendTo(nil)[:5]) {
		t.Fatal("kafkaGoReadable: want the version-0 layout readable, a version-1 one with owned partitions and a truncated one not")
	}
	answer := func(leader string, members map[string][]byte) *kmsg.JoinGroupResponse {
		r := kmsg.NewPtrJoinGroupResponse()
		r.LeaderID, r.MemberID = leader, leader
		for id, meta := range members {
			m := kmsg.NewJoinGroupResponseMember()
			m.MemberID, m.ProtocolMetadata = id, meta
			r.Members = append(r.Members, m)
		}
		return r
	}
	k := newKafkaGoLeads("kafkago")
	kg := server.Client{ID: "kafkago"}
	k.observe(kg, nil, answer("kafkago-1", map[string][]byte{"kafkago-1": v0.AppendTo(nil), "sarama-1": v1.AppendTo(nil)}))
	k.observe(kg, nil, answer("kafkago-2", map[string][]byte{"kafkago-2": v0.AppendTo(nil)}))                        // readable
	k.observe(server.Client{ID: "sarama"}, nil, answer("sarama-2", map[string][]byte{"sarama-3": v1.AppendTo(nil)})) // not kafka-go
	line := func(member string) string {
		return "error: Failed to join group g: " + kafkaGoUnreadable + member + ": %!w(<nil>)"
	}
	if err := k.check([]string{line("sarama-1"), "error: something else"}); err != nil {
		t.Errorf("one line for one answer: %v", err)
	}
	if err := k.check([]string{line("sarama-1"), line("sarama-1")}); err == nil {
		t.Error("two lines for one answer: passed")
	}
	if err := k.check([]string{line("sarama-3")}); err == nil {
		t.Error("a line naming a member never handed to kafka-go: passed")
	}
	if err := k.check([]string{line("kafkago-2")}); err == nil {
		t.Error("a line naming a readable subscription: passed")
	}
}
