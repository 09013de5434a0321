package clients

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	ckafka "github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cohort-dev/cohort/clients/testbed"
)

// TestTopicAdminConfluentBare: librdkafka's admin client (through
// confluent-kafka-go) manages topics on a bare node, with no router: create
// (configs accepted and dropped), describe configs of the topic and the
// broker (empty: cohort keeps none), grow, delete, and Kafka's errors for a
// topic created twice and the configs of a missing topic; a group's configs;
// and the cluster as DescribeCluster shows it.
func TestTopicAdminConfluentBare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := testbed.StartBare(t, nil)
	adm, err := ckafka.NewAdminClient(&ckafka.ConfigMap{"bootstrap.servers": b.Addr(), "broker.address.family": "v4", "client.id": "rd-topics"})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	spec := ckafka.TopicSpecification{Topic: "rd-orders", NumPartitions: 3, ReplicationFactor: 1, Config: map[string]string{"retention.ms": "86400000"}}
	res, err := adm.CreateTopics(ctx, []ckafka.TopicSpecification{spec})
	if err != nil || res[0].Error.Code() != ckafka.ErrNoError {
		t.Fatalf("CreateTopics: %v %v", err, res)
	}
	res, err = adm.CreateTopics(ctx, []ckafka.TopicSpecification{spec})
	if err != nil || res[0].Error.Code() != ckafka.ErrTopicAlreadyExists {
		t.Fatalf("CreateTopics twice: %v %v", err, res)
	}
	configs, err := adm.DescribeConfigs(ctx, []ckafka.ConfigResource{
		{Type: ckafka.ResourceTopic, Name: "rd-orders"},
		{Type: ckafka.ResourceBroker, Name: "0"},
	})
	if err != nil || len(configs) != 2 {
		t.Fatalf("DescribeConfigs: %v %v", err, configs)
	}
	for _, c := range configs {
		if c.Error.Code() != ckafka.ErrNoError || len(c.Config) != 0 {
			t.Errorf("DescribeConfigs %s %s: %v, %d configs", c.Type, c.Name, c.Error, len(c.Config))
		}
	}
	missing, err := adm.DescribeConfigs(ctx, []ckafka.ConfigResource{{Type: ckafka.ResourceTopic, Name: "rd-missing"}})
	if err != nil || missing[0].Error.Code() != ckafka.ErrUnknownTopicOrPart {
		t.Errorf("DescribeConfigs of a missing topic: %v %v", err, missing)
	}
	grown, err := adm.CreatePartitions(ctx, []ckafka.PartitionsSpecification{{Topic: "rd-orders", IncreaseTo: 5}})
	if err != nil || grown[0].Error.Code() != ckafka.ErrNoError {
		t.Fatalf("CreatePartitions: %v %v", err, grown)
	}
	md, err := adm.GetMetadata(nil, true, 10_000)
	if err != nil || len(md.Topics["rd-orders"].Partitions) != 5 {
		t.Fatalf("metadata after growing: %v %+v", err, md)
	}
	// DescribeCluster: librdkafka answers this call from Metadata (it does
	// not send the DescribeCluster API, which the Java admin client does).
	cluster, err := adm.DescribeCluster(ctx, ckafka.SetAdminOptionIncludeAuthorizedOperations(true))
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	if cluster.ClusterID == nil || *cluster.ClusterID == "" ||
		len(cluster.Nodes) != 1 || cluster.Controller == nil || cluster.Controller.ID != cluster.Nodes[0].ID ||
		len(md.Brokers) != 1 || cluster.Nodes[0].ID != int(md.Brokers[0].ID) || cluster.Nodes[0].Port != md.Brokers[0].Port {
		t.Errorf("DescribeCluster: %+v, Metadata's brokers %+v", cluster, md.Brokers)
	}
	if len(cluster.AuthorizedOperations) == 0 { // no ACLs: every cluster operation
		t.Errorf("DescribeCluster: no authorized operations")
	}
	// Group configs (KIP-848): a consumer group's own heartbeat interval,
	// set and read back through librdkafka's config admin calls.
	alter := []ckafka.ConfigResource{{Type: ckafka.ResourceGroup, Name: "rd-group", Config: []ckafka.ConfigEntry{
		{Name: "consumer.heartbeat.interval.ms", Value: "1500", IncrementalOperation: ckafka.AlterConfigOpTypeSet}}}}
	altered, err := adm.IncrementalAlterConfigs(ctx, alter)
	if err != nil || len(altered) != 1 || altered[0].Error.Code() != ckafka.ErrNoError {
		t.Fatalf("IncrementalAlterConfigs of a group: %v %v", err, altered)
	}
	gconf, err := adm.DescribeConfigs(ctx, []ckafka.ConfigResource{{Type: ckafka.ResourceGroup, Name: "rd-group"}})
	if err != nil || len(gconf) != 1 || gconf[0].Error.Code() != ckafka.ErrNoError {
		t.Fatalf("DescribeConfigs of a group: %v %v", err, gconf)
	}
	if e := gconf[0].Config["consumer.heartbeat.interval.ms"]; e.Value != "1500" || e.Source != ckafka.ConfigSourceGroup {
		t.Errorf("the group's heartbeat interval: %+v", e)
	}
	if e := gconf[0].Config["consumer.session.timeout.ms"]; e.Value != "45000" || e.Source != ckafka.ConfigSourceDefault {
		t.Errorf("the group's session timeout (the node's default): %+v", e)
	}
	bad, err := adm.IncrementalAlterConfigs(ctx, []ckafka.ConfigResource{{Type: ckafka.ResourceGroup, Name: "rd-group", Config: []ckafka.ConfigEntry{
		{Name: "consumer.session.timeout.ms", Value: "1000", IncrementalOperation: ckafka.AlterConfigOpTypeSet}}}})
	if err != nil || len(bad) != 1 || bad[0].Error.Code() != ckafka.ErrInvalidConfig || !strings.Contains(bad[0].Error.String(), "must be greater than") {
		t.Errorf("a session timeout below the interval: %v %v", err, bad)
	}
	deleted, err := adm.DeleteTopics(ctx, []string{"rd-orders"})
	if err != nil || deleted[0].Error.Code() != ckafka.ErrNoError {
		t.Fatalf("DeleteTopics: %v %v", err, deleted)
	}
	if _, ok := b.Node.Catalog().Lookup("rd-orders"); ok {
		t.Fatal("rd-orders still in the catalog")
	}
}

// TestTopicAdminKafkajsBare: kafkajs's admin client (clients/kafkajs/
// topics.js) does the same on a bare node.
func TestTopicAdminKafkajsBare(t *testing.T) {
	needKafkajs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := testbed.StartBare(t, nil)
	cmd := exec.CommandContext(ctx, "node", "topics.js")
	cmd.Dir = "kafkajs"
	cmd.Env = append(os.Environ(), "BROKER="+b.Addr(), "TOPIC=js-orders")
	outb, err := cmd.Output()
	got := strings.TrimSpace(string(outb))
	want := strings.Join([]string{
		"CREATED true",
		"AGAIN false", // kafkajs's answer for TOPIC_ALREADY_EXISTS
		`CONFIGS [[2,"js-orders",0,0],[4,"0",0,0]]`,
		"PARTITIONS 5",
		"DELETED",
	}, "\n")
	if err != nil || got != want {
		t.Fatalf("topics.js: %v\n%s\nwant\n%s", err, got, want)
	}
	if _, ok := b.Node.Catalog().Lookup("js-orders"); ok {
		t.Fatal("js-orders still in the catalog")
	}
}

// TestAdminKafkaPythonBare: kafka-python's KafkaAdminClient
// (clients/kafkapython/admin.py), with older API versions than the other
// clients' (kafka-python 2.0.2 takes the highest it knows: CreateTopics v3,
// DeleteTopics v3, CreatePartitions v1, DescribeConfigs v2, DescribeGroups
// v3, ListGroups v2, OffsetFetch v3, DeleteGroups v1, FindCoordinator v0),
// on a bare node: topics created, described, grown and
// deleted, and a group of one kafka-python consumer listed, described, its
// offsets fetched, refused deletion while it has a member and deleted once
// it left.
func TestAdminKafkaPythonBare(t *testing.T) {
	needKafkaPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := testbed.StartBare(t, nil)
	cmd := exec.CommandContext(ctx, kafkaPythonInterpreter, "admin.py")
	cmd.Dir = "kafkapython"
	cmd.Env = append(os.Environ(), "BROKER="+b.Addr(), "TOPIC=py-orders", "GROUP=py-group")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	got := strings.TrimSpace(string(outb))
	want := strings.Join([]string{
		"CREATE [('py-orders', 0)]",
		"CREATE_AGAIN ERR TopicAlreadyExistsError",
		"LIST True",
		"DESCRIBE [(0, 0, [0]), (1, 0, [0]), (2, 0, [0])]",
		"CLUSTER [(0, True)]",
		"GROW [('py-orders', 0)]",
		"DESCRIBE_GROWN 5",
		"CONFIGS [(2, 'py-orders', 0, 0), (4, '0', 0, 0)]", // topic and broker: no error, no entries
		"ASSIGNED [0, 1, 2, 3, 4]",
		"COMMIT None",
		"GROUPS [('py-group', 'consumer')]",
		"DESCRIBE_GROUP [('Stable', 'consumer', 'range', [('py-member', [0, 1, 2, 3, 4])])]",
		"OFFSETS [(0, 10, 'm'), (1, 11, 'm'), (2, 12, 'm'), (3, 13, 'm'), (4, 14, 'm')]",
		"OFFSETS_ONE [(3, 13)]",
		"DELETE_LIVE_GROUP [('py-group', 'NonEmptyGroupError')]",
		"DESCRIBE_LEFT [('Empty', 0)]",
		"DELETE_GROUP [('py-group', 'NoError')]",
		"OFFSETS_DELETED {}",
		"DELETE [('py-orders', 0)]",
		"DELETE_AGAIN ERR UnknownTopicOrPartitionError",
	}, "\n")
	if err != nil || got != want {
		t.Fatalf("admin.py: %v\n%s\nwant\n%s\nstderr:\n%s", err, got, want, stderr.String())
	}
	if _, ok := b.Node.Catalog().Lookup("py-orders"); ok {
		t.Fatal("py-orders still in the catalog")
	}
}
