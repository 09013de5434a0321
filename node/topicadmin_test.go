package node

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTopicAdminSarama: IBM/sarama's ClusterAdmin manages topics on a bare
// node: create (with configs, which cohort drops), list (which describes
// every topic's configs: it failed before cohort answered DescribeConfigs),
// describe, grow, delete, with Kafka's errors for a topic created twice or
// deleted twice.
func TestTopicAdminSarama(t *testing.T) {
	n := startNode(t, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Admin.Timeout = 5 * time.Second
	adm, err := sarama.NewClusterAdmin([]string{n.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	retention := "86400000"
	detail := &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &retention}}
	if err := adm.CreateTopic("orders", detail, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if err := adm.CreateTopic("orders", detail, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("CreateTopic twice: %v, want ErrTopicAlreadyExists", err)
	}
	topics, err := adm.ListTopics()
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if d, ok := topics["orders"]; !ok || d.NumPartitions != 3 {
		t.Fatalf("ListTopics: %+v", topics)
	}
	// The deprecated single-resource call is the one sarama's own tools and
	// older applications still make; it must keep working.
	//lint:ignore SA1019 tested on purpose (see above)
	if _, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "orders"}); err != nil {
		t.Fatalf("DescribeConfig of the topic: %v", err)
	}
	//lint:ignore SA1019 tested on purpose (see above)
	if _, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "0"}); err != nil {
		t.Fatalf("DescribeConfig of the broker: %v", err)
	}
	if err := adm.CreatePartitions("orders", 5, nil, false); err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	md, err := adm.DescribeTopics([]string{"orders"})
	if err != nil || len(md) != 1 || len(md[0].Partitions) != 5 {
		t.Fatalf("DescribeTopics after growing: %+v %v", md, err)
	}
	if err := adm.DeleteTopic("orders"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if err := adm.DeleteTopic("orders"); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Fatalf("DeleteTopic twice: %v, want ErrUnknownTopicOrPartition", err)
	}
}

// TestTopicAdminKadm: franz-go's kadm does the same, and reads topic and
// broker configs (empty: cohort keeps none).
func TestTopicAdminKadm(t *testing.T) {
	n := startNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, n.Addr()))
	// Listings go through a new client each: kgo answers Metadata from its
	// cache for a while.
	fresh := func() *kadm.Client { return kadm.NewClient(client(t, n.Addr())) }
	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "k1", "k2")
	if err != nil || created.Error() != nil {
		t.Fatalf("CreateTopics: %v %v", err, created.Error())
	}
	grown, err := adm.CreatePartitions(ctx, 2, "k1")
	if err != nil || grown.Error() != nil {
		t.Fatalf("CreatePartitions: %v %v", err, grown.Error())
	}
	configs, err := adm.DescribeTopicConfigs(ctx, "k1", "nope")
	if err != nil {
		t.Fatalf("DescribeTopicConfigs: %v", err)
	}
	if c, _ := configs.On("k1", nil); c.Err != nil || len(c.Configs) != 0 {
		t.Errorf("k1 configs: %+v", c)
	}
	if c, _ := configs.On("nope", nil); !errors.Is(c.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("configs of a missing topic: %v", c.Err)
	}
	if _, err := adm.DescribeBrokerConfigs(ctx); err != nil {
		t.Fatalf("DescribeBrokerConfigs: %v", err)
	}
	listed, err := fresh().ListTopics(ctx)
	if err != nil || !slices.Equal(listed.Names(), []string{"k1", "k2"}) || len(listed["k1"].Partitions) != 5 {
		t.Fatalf("ListTopics: %v %v", listed.Names(), err)
	}
	deleted, err := adm.DeleteTopics(ctx, "k1", "k2")
	if err != nil || deleted.Error() != nil {
		t.Fatalf("DeleteTopics: %v %v", err, deleted.Error())
	}
	if listed, err := fresh().ListTopics(ctx); err != nil || len(listed) != 0 {
		t.Fatalf("ListTopics after deleting: %v %v", listed.Names(), err)
	}
}
