package clients

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	ckafka "github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cohort-dev/cohort/clients/testbed"
)

// adminBed: topic "adm" (4 partitions, 40 records), group live (one kgo
// member, Stable, holding all 4 partitions) and group empty (offsets only,
// committed outside any generation).
func adminBed(t *testing.T, ctx context.Context, live, empty string) *testbed.Bed {
	const topic, P, K = "adm", 4, 40
	b := testbed.Start(t, testbed.Options{Topics: map[string]int32{topic: P}})
	b.Produce(t, topic, P, 0, K)
	seen := testbed.NewSeen()
	m := startKgo(t, b, MemberConfig{Group: live, Topic: topic, ClientID: "live-1", Protocol: "range", Seen: seen})
	t.Cleanup(m.Close)
	waitMembers(ctx, t, b, live, 0, 1)
	if err := b.WaitCommitted(ctx, live, b.EndOffsets(t, topic)); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	for p := int32(0); p < P; p++ {
		offs.AddOffset(topic, p, 3, -1)
	}
	resp, err := b.Admin().CommitOffsets(ctx, empty, offs)
	if err != nil || resp.Error() != nil {
		t.Fatalf("seeding %s: %v %v", empty, err, resp.Error())
	}
	return b
}

// TestAdminKadm (5): franz-go kadm.
func TestAdminKadm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := adminBed(t, ctx, "kadm-live", "kadm-empty")
	adm := b.Admin()

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"kadm-live", "kadm-empty"} {
		if _, ok := listed[g]; !ok {
			t.Errorf("ListGroups: %s missing from %v", g, listed.Groups())
		}
	}
	if s := listed["kadm-live"].State; s != "Stable" {
		t.Errorf("ListGroups: kadm-live state %q", s)
	}

	described, err := adm.DescribeGroups(ctx, "kadm-live", "kadm-empty")
	if err != nil {
		t.Fatal(err)
	}
	live := described["kadm-live"]
	if live.Err != nil || live.State != "Stable" || live.Protocol != "range" || len(live.Members) != 1 {
		t.Fatalf("DescribeGroups kadm-live: err %v state %q protocol %q members %d", live.Err, live.State, live.Protocol, len(live.Members))
	}
	ca, ok := live.Members[0].Assigned.AsConsumer()
	if !ok || len(ca.Topics) != 1 || ca.Topics[0].Topic != "adm" || len(ca.Topics[0].Partitions) != 4 {
		t.Errorf("DescribeGroups: member assignment %+v", ca)
	}
	if s := described["kadm-empty"].State; s != "Empty" {
		t.Errorf("DescribeGroups kadm-empty: state %q", s)
	}

	fetched, err := adm.FetchOffsets(ctx, "kadm-empty")
	if err != nil || fetched.Error() != nil {
		t.Fatal(err, fetched.Error())
	}
	if o, _ := fetched.Lookup("adm", 2); o.At != 3 {
		t.Errorf("FetchOffsets: adm/2 at %d, want 3", o.At)
	}
	// Alter: commit new offsets to the empty group.
	alter := kadm.Offsets{}
	alter.AddOffset("adm", 2, 7, -1)
	if r, err := adm.CommitOffsets(ctx, "kadm-empty", alter); err != nil || r.Error() != nil {
		t.Fatalf("CommitOffsets: %v %v", err, r.Error())
	}
	fetched, _ = adm.FetchOffsets(ctx, "kadm-empty")
	if o, _ := fetched.Lookup("adm", 2); o.At != 7 {
		t.Errorf("after CommitOffsets: adm/2 at %d, want 7", o.At)
	}
	// Delete one partition's offset.
	del, err := adm.DeleteOffsets(ctx, "kadm-empty", kadm.TopicsSet{"adm": {1: {}}})
	if err != nil || del.Error() != nil {
		t.Fatalf("DeleteOffsets: %v %v", err, del.Error())
	}
	fetched, _ = adm.FetchOffsets(ctx, "kadm-empty")
	if o, ok := fetched.Lookup("adm", 1); ok && o.At >= 0 {
		t.Errorf("after DeleteOffsets: adm/1 at %d", o.At)
	}
	// Deleting the offsets of a topic the live group consumes: GROUP_SUBSCRIBED_TO_TOPIC.
	del, err = adm.DeleteOffsets(ctx, "kadm-live", kadm.TopicsSet{"adm": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := del["adm"][0]; !errors.Is(e, kerr.GroupSubscribedToTopic) {
		t.Errorf("DeleteOffsets on the live group: %v, want GROUP_SUBSCRIBED_TO_TOPIC", e)
	}
	// Delete groups: the live one is refused, the empty one goes.
	dg, err := adm.DeleteGroups(ctx, "kadm-live", "kadm-empty")
	if err != nil {
		t.Fatal(err)
	}
	if e := dg["kadm-live"].Err; !errors.Is(e, kerr.NonEmptyGroup) {
		t.Errorf("DeleteGroups kadm-live: %v, want NON_EMPTY_GROUP", e)
	}
	if e := dg["kadm-empty"].Err; e != nil {
		t.Errorf("DeleteGroups kadm-empty: %v", e)
	}
	described, err = adm.DescribeGroups(ctx, "kadm-empty")
	if err != nil {
		t.Fatal(err)
	}
	if s := described["kadm-empty"].State; s != "Dead" {
		t.Errorf("after delete: kadm-empty state %q, want Dead", s)
	}
}

// TestAdminSarama (5): IBM/sarama ClusterAdmin.
func TestAdminSarama(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := adminBed(t, ctx, "sarama-live", "sarama-empty")
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "sarama-admin"
	adm, err := sarama.NewClusterAdmin([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	listed, err := adm.ListConsumerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"sarama-live", "sarama-empty"} {
		if _, ok := listed[g]; !ok {
			t.Errorf("ListConsumerGroups: %s missing from %v", g, listed)
		}
	}
	described, err := adm.DescribeConsumerGroups([]string{"sarama-live", "sarama-empty"})
	if err != nil || len(described) != 2 {
		t.Fatalf("DescribeConsumerGroups: %v (%d)", err, len(described))
	}
	live := described[0]
	if live.State != "Stable" || live.Protocol != "range" || len(live.Members) != 1 {
		t.Fatalf("sarama-live: state %q protocol %q members %d", live.State, live.Protocol, len(live.Members))
	}
	for _, m := range live.Members {
		a, err := m.GetMemberAssignment()
		if err != nil || len(a.Topics["adm"]) != 4 {
			t.Errorf("member assignment %+v %v", a, err)
		}
	}
	if described[1].State != "Empty" {
		t.Errorf("sarama-empty: state %q", described[1].State)
	}

	offs, err := adm.ListConsumerGroupOffsets("sarama-empty", map[string][]int32{"adm": {0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if blk := offs.GetBlock("adm", 2); blk == nil || blk.Offset != 3 {
		t.Errorf("ListConsumerGroupOffsets adm/2: %+v", blk)
	}
	if _, err := adm.AlterConsumerGroupOffsets("sarama-empty", map[string]map[int32]sarama.OffsetAndMetadata{"adm": {2: {Offset: 7, LeaderEpoch: -1}}}, nil); err != nil {
		t.Fatalf("AlterConsumerGroupOffsets: %v", err)
	}
	offs, _ = adm.ListConsumerGroupOffsets("sarama-empty", map[string][]int32{"adm": {2}})
	if blk := offs.GetBlock("adm", 2); blk == nil || blk.Offset != 7 {
		t.Errorf("after alter adm/2: %+v", blk)
	}
	if err := adm.DeleteConsumerGroupOffset("sarama-empty", "adm", 1); err != nil {
		t.Fatalf("DeleteConsumerGroupOffset: %v", err)
	}
	offs, _ = adm.ListConsumerGroupOffsets("sarama-empty", map[string][]int32{"adm": {1}})
	if blk := offs.GetBlock("adm", 1); blk == nil || blk.Offset != -1 {
		t.Errorf("after delete adm/1: %+v", blk)
	}
	if err := adm.DeleteConsumerGroupOffset("sarama-live", "adm", 0); !errors.Is(err, sarama.ErrGroupSubscribedToTopic) {
		t.Errorf("DeleteConsumerGroupOffset on the live group: %v, want ErrGroupSubscribedToTopic", err)
	}
	if err := adm.DeleteConsumerGroup("sarama-live"); !errors.Is(err, sarama.ErrNonEmptyGroup) {
		t.Errorf("DeleteConsumerGroup sarama-live: %v, want ErrNonEmptyGroup", err)
	}
	if err := adm.DeleteConsumerGroup("sarama-empty"); err != nil {
		t.Errorf("DeleteConsumerGroup sarama-empty: %v", err)
	}
	described, err = adm.DescribeConsumerGroups([]string{"sarama-empty"})
	if err != nil || len(described) != 1 || described[0].State != "Dead" {
		t.Errorf("after delete: %v %+v", err, described)
	}
}

// TestAdminConfluent (5): confluent-kafka-go's AdminClient (librdkafka).
// confluent-kafka-go has no OffsetDelete call; the other operations are
// covered.
func TestAdminConfluent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := adminBed(t, ctx, "rd-live", "rd-empty")
	adm, err := ckafka.NewAdminClient(&ckafka.ConfigMap{"bootstrap.servers": b.Addr(), "broker.address.family": "v4", "client.id": "rd-admin"})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	listed, err := adm.ListConsumerGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]ckafka.ConsumerGroupState{}
	for _, g := range listed.Valid {
		states[g.GroupID] = g.State
	}
	if states["rd-live"] != ckafka.ConsumerGroupStateStable || states["rd-empty"] != ckafka.ConsumerGroupStateEmpty {
		t.Errorf("ListConsumerGroups: %v (errors %v)", states, listed.Errors)
	}
	described, err := adm.DescribeConsumerGroups(ctx, []string{"rd-live", "rd-empty"})
	if err != nil || len(described.ConsumerGroupDescriptions) != 2 {
		t.Fatalf("DescribeConsumerGroups: %v %+v", err, described)
	}
	live := described.ConsumerGroupDescriptions[0]
	if live.Error.Code() != ckafka.ErrNoError || live.State != ckafka.ConsumerGroupStateStable || live.PartitionAssignor != "range" || len(live.Members) != 1 {
		t.Fatalf("rd-live: %+v", live)
	}
	if n := len(live.Members[0].Assignment.TopicPartitions); n != 4 {
		t.Errorf("rd-live member assignment: %v", live.Members[0].Assignment.TopicPartitions)
	}
	if s := described.ConsumerGroupDescriptions[1].State; s != ckafka.ConsumerGroupStateEmpty {
		t.Errorf("rd-empty: state %v", s)
	}

	topic := "adm"
	tps := func(ps ...int32) []ckafka.TopicPartition {
		var out []ckafka.TopicPartition
		for _, p := range ps {
			out = append(out, ckafka.TopicPartition{Topic: &topic, Partition: p})
		}
		return out
	}
	offsets := func() map[int32]int64 {
		res, err := adm.ListConsumerGroupOffsets(ctx, []ckafka.ConsumerGroupTopicPartitions{{Group: "rd-empty", Partitions: tps(0, 1, 2, 3)}})
		if err != nil || len(res.ConsumerGroupsTopicPartitions) != 1 {
			t.Fatalf("ListConsumerGroupOffsets: %v", err)
		}
		out := map[int32]int64{}
		for _, tp := range res.ConsumerGroupsTopicPartitions[0].Partitions {
			out[tp.Partition] = int64(tp.Offset)
		}
		return out
	}
	if o := offsets(); o[2] != 3 {
		t.Errorf("ListConsumerGroupOffsets: %v", o)
	}
	alter := tps(2)
	alter[0].Offset = 7
	if _, err := adm.AlterConsumerGroupOffsets(ctx, []ckafka.ConsumerGroupTopicPartitions{{Group: "rd-empty", Partitions: alter}}); err != nil {
		t.Fatalf("AlterConsumerGroupOffsets: %v", err)
	}
	if o := offsets(); o[2] != 7 {
		t.Errorf("after alter: %v", o)
	}
	del, err := adm.DeleteConsumerGroups(ctx, []string{"rd-live", "rd-empty"})
	if err != nil || len(del.ConsumerGroupResults) != 2 {
		t.Fatalf("DeleteConsumerGroups: %v %+v", err, del)
	}
	codes := map[string]ckafka.ErrorCode{}
	for _, r := range del.ConsumerGroupResults {
		codes[r.Group] = r.Error.Code()
	}
	if codes["rd-live"] != ckafka.ErrNonEmptyGroup || codes["rd-empty"] != ckafka.ErrNoError {
		t.Errorf("DeleteConsumerGroups: %v, want rd-live NON_EMPTY_GROUP and rd-empty deleted", codes)
	}
	described, err = adm.DescribeConsumerGroups(ctx, []string{"rd-empty"})
	if err != nil || len(described.ConsumerGroupDescriptions) != 1 || described.ConsumerGroupDescriptions[0].State != ckafka.ConsumerGroupStateDead {
		t.Errorf("after delete: %v %+v", err, described)
	}
}
