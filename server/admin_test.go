package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

func createReq(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = validateOnly
	req.Topics = topics
	return req
}

func newTopic(name string, n int32) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, n, 3 // RF is ignored (without an assignment)
	return t
}

func codes[T any](items []T, f func(T) (string, int16)) string {
	var out []string
	for _, it := range items {
		n, c := f(it)
		out = append(out, fmt.Sprintf("%s=%d", n, c))
	}
	return strings.Join(out, ",")
}

func createCodes(r *kmsg.CreateTopicsResponse) string {
	return codes(r.Topics, func(t kmsg.CreateTopicsResponseTopic) (string, int16) { return t.Topic, t.ErrorCode })
}

func TestCreateTopicsWithKgo(t *testing.T) {
	ts := startServer(t)
	cl := ts.kgoClient(t)
	ctx := testCtx(t)
	cat := ts.srv.Catalog()

	// ValidateOnly: answers as if created, creates nothing.
	resp, err := createReq(true, newTopic("orders", 6)).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := createCodes(resp); got != "orders=0" || cat.Len() != 0 {
		t.Fatalf("validate-only: %s, catalog has %d topics", got, cat.Len())
	}

	assign := newTopic("assigned", -1)
	assign.ReplicationFactor = -1 // with an assignment, as Kafka's admin clients send it
	for p := int32(0); p < 4; p++ {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{0}
		assign.ReplicaAssignment = append(assign.ReplicaAssignment, a)
	}
	resp, err = createReq(false,
		newTopic("orders", 6),
		newTopic("default", -1),
		newTopic("zero", 0),
		newTopic("neg", -7),
		newTopic("bad/name", 1),
		newTopic("..", 1),
		newTopic("dup", 1), newTopic("dup", 2),
		assign,
	).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := "orders=0,default=0,zero=37,neg=37,bad/name=17,..=17,dup=42,dup=42,assigned=0"
	if got := createCodes(resp); got != want {
		t.Fatalf("create: %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name string
		n    int32
	}{{"orders", 6}, {"default", 1}, {"assigned", 4}} {
		tp, ok := cat.Lookup(tc.name)
		if !ok || tp.Partitions != tc.n {
			t.Errorf("%s: %+v, %v; want %d partitions", tc.name, tp, ok, tc.n)
		}
	}
	if resp.Topics[0].TopicID != catalog.TopicID("orders") || resp.Topics[0].NumPartitions != 6 {
		t.Errorf("v%d response for orders: id %x partitions %d", resp.Version, resp.Topics[0].TopicID, resp.Topics[0].NumPartitions)
	}
	if resp.Topics[2].ErrorMessage == nil {
		t.Error("an error came without a message")
	}

	resp, err = createReq(false, newTopic("orders", 1)).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := createCodes(resp); got != "orders=36" {
		t.Fatalf("re-create: %s, want TOPIC_ALREADY_EXISTS", got)
	}
}

func TestCreateTopicsEveryVersion(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	for v := int16(0); v <= 7; v++ {
		req := createReq(false, newTopic(fmt.Sprintf("t%d", v), 2))
		req.SetVersion(v)
		resp := c.roundTrip(req).(*kmsg.CreateTopicsResponse)
		if got := createCodes(resp); got != fmt.Sprintf("t%d=0", v) {
			t.Fatalf("v%d: %s", v, got)
		}
	}
	if ts.srv.Catalog().Len() != 8 {
		t.Fatalf("%d topics, want 8", ts.srv.Catalog().Len())
	}
}

func TestCreateTopicsPersistFailure(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Catalog = catalog.New(catalog.Options{PersistTopic: func(string, []byte) error { return errors.New("disk on fire") }})
	})
	resp := ts.dial(t).roundTrip(createReq(false, newTopic("x", 1))).(*kmsg.CreateTopicsResponse)
	if got := createCodes(resp); got != "x=56" {
		t.Fatalf("%s, want KAFKA_STORAGE_ERROR(56)", got)
	}
}

func TestDeleteTopicsEveryVersion(t *testing.T) {
	ts := startServer(t)
	cat := ts.srv.Catalog()
	c := ts.dial(t)
	for v := int16(0); v <= 6; v++ {
		name := fmt.Sprintf("del%d", v)
		createTopic(t, cat, name, 1, nil)
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(v)
		if v < 6 {
			req.TopicNames = []string{name, "ghost"}
		} else {
			byName := kmsg.NewDeleteTopicsRequestTopic()
			byName.Topic = kmsg.StringPtr(name)
			ghost := kmsg.NewDeleteTopicsRequestTopic()
			ghost.Topic = kmsg.StringPtr("ghost")
			req.Topics = []kmsg.DeleteTopicsRequestTopic{byName, ghost}
		}
		resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
		got := codes(resp.Topics, func(t kmsg.DeleteTopicsResponseTopic) (string, int16) { return *t.Topic, t.ErrorCode })
		if want := name + "=0,ghost=3"; got != want {
			t.Fatalf("v%d: %s, want %s", v, got, want)
		}
		if _, ok := cat.Lookup(name); ok {
			t.Fatalf("v%d: %s not deleted", v, name)
		}
	}
	// v6 by topic ID, known and unknown.
	tp := createTopic(t, cat, "by-id", 1, nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	known, unknown := kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic()
	known.TopicID, unknown.TopicID = tp.ID, [16]byte{9}
	req.Topics = []kmsg.DeleteTopicsRequestTopic{known, unknown}
	resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
	if r := resp.Topics[0]; r.ErrorCode != 0 || r.Topic == nil || *r.Topic != "by-id" || r.TopicID != tp.ID {
		t.Errorf("delete by id: %+v", r)
	}
	if r := resp.Topics[1]; r.ErrorCode != 100 {
		t.Errorf("delete unknown id: error %d, want 100", r.ErrorCode)
	}
	if cat.Len() != 0 {
		t.Fatalf("%d topics left", cat.Len())
	}
}

func TestCreatePartitionsWithKgo(t *testing.T) {
	ts := startServer(t)
	cat := ts.srv.Catalog()
	createTopic(t, cat, "grow", 2, nil)
	createTopic(t, cat, "same", 3, nil)
	cl := ts.kgoClient(t)
	ctx := testCtx(t)
	mk := func(validate bool, parts ...any) *kmsg.CreatePartitionsRequest {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = validate
		for i := 0; i < len(parts); i += 2 {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = parts[i].(string), int32(parts[i+1].(int))
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	partCodes := func(r *kmsg.CreatePartitionsResponse) string {
		return codes(r.Topics, func(t kmsg.CreatePartitionsResponseTopic) (string, int16) { return t.Topic, t.ErrorCode })
	}
	resp, err := mk(true, "grow", 5).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if tp, _ := cat.Lookup("grow"); partCodes(resp) != "grow=0" || tp.Partitions != 2 {
		t.Fatalf("validate-only: %s, %d partitions", partCodes(resp), tp.Partitions)
	}
	resp, err = mk(false, "grow", 5, "same", 3, "same2", 1, "ghost", 4).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := partCodes(resp), "grow=0,same=37,same2=3,ghost=3"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	resp, err = mk(false, "grow", 4, "grow", 9).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := partCodes(resp), "grow=42,grow=42"; got != want {
		t.Fatalf("duplicates: %s, want %s", got, want)
	}
	resp, err = mk(false, "grow", 4).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := partCodes(resp); got != "grow=37" {
		t.Fatalf("decrease: %s, want INVALID_PARTITIONS", got)
	}
	if tp, _ := cat.Lookup("grow"); tp.Partitions != 5 {
		t.Fatalf("grow has %d partitions, want 5", tp.Partitions)
	}
	// A replica assignment must cover exactly the new partitions.
	bad := mk(false, "grow", 7)
	bad.Topics[0].Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}}
	resp, err = bad.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := partCodes(resp); got != "grow=39" {
		t.Fatalf("short assignment: %s, want INVALID_REPLICA_ASSIGNMENT", got)
	}
}

func TestCreateTopicsAssignmentCarriesRacks(t *testing.T) {
	ra, rb := "a", "b"
	topo := &fakeTopology{brokers: []Broker{{NodeID: 1, Host: "h", Port: 1, Rack: &ra}, {NodeID: 2, Host: "h", Port: 2, Rack: &rb}}}
	ts := startServer(t, func(c *Config) { c.Topology = topo })
	tp := newTopic("racked", -1)
	tp.ReplicationFactor = -1
	for p, reps := range [][]int32{{2}, {1, 2}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), reps
		tp.ReplicaAssignment = append(tp.ReplicaAssignment, a)
	}
	if got := createCodes(ts.dial(t).roundTrip(createReq(false, tp)).(*kmsg.CreateTopicsResponse)); got != "racked=0" {
		t.Fatal(got)
	}
	got, _ := ts.srv.Catalog().Lookup("racked")
	if fmt.Sprint(got.Racks) != "[[b] [a b]]" {
		t.Fatalf("racks %v, want [[b] [a b]]", got.Racks)
	}
}

func assignTopic(name string, rf int16, reps ...[]int32) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, -1, rf
	for p, r := range reps {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), r
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	return t
}

// CreateTopics validates the replication factor and a manual assignment's
// replica lists as Kafka's controller does (cohort ignored both): with an
// assignment the factor must be -1, a list must be non-empty, name a broker
// once and only registered brokers; without one the factor must be positive
// or -1. Kafka's own log topic cannot be created.
func TestCreateTopicsValidation(t *testing.T) {
	ts := startServer(t) // one broker, id 0
	rf := func(name string, n int32, r int16) kmsg.CreateTopicsRequestTopic {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, n, r
		return t
	}
	resp := ts.dial(t).roundTrip(createReq(true,
		assignTopic("assign-rf1", 1, []int32{0}),      // RF must be -1 with an assignment: 42
		assignTopic("empty-replicas", -1, []int32{}),  // 39
		assignTopic("dup-broker", -1, []int32{0, 0}),  // 39
		assignTopic("unknown-broker", -1, []int32{7}), // 39
		rf("rf-zero", 1, 0),                           // 38
		rf("rf-neg", 1, -2),                           // 38
		rf("__cluster_metadata", 1, -1),               // 42
	)).(*kmsg.CreateTopicsResponse)
	want := "assign-rf1=42,empty-replicas=39,dup-broker=39,unknown-broker=39,rf-zero=38,rf-neg=38,__cluster_metadata=42"
	if got := createCodes(resp); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// CreateTopics checks a topic's name, and whether it exists, before its
// partitions and replicas, as Kafka does. (cohort looked at the assignment
// first.)
func TestCreateTopicsCheckOrder(t *testing.T) {
	ts := startServer(t)
	createTopic(t, ts.srv.Catalog(), "exists", 1, nil)
	badName := assignTopic("bad/name", -1, []int32{0})
	badName.NumPartitions = 3 // 42 if looked at, but the name comes first
	existing := assignTopic("exists", -1, []int32{0})
	existing.ReplicaAssignment[0].Partition = 5 // 39 if looked at
	resp := ts.dial(t).roundTrip(createReq(true, badName, existing)).(*kmsg.CreateTopicsResponse)
	if got := createCodes(resp); got != "bad/name=17,exists=36" {
		t.Errorf("got %s, want bad/name=17,exists=36", got)
	}
}

// CreatePartitions refuses a non-null empty assignment list and bad replica
// lists (empty, a broker twice, a broker not in the cluster) with
// INVALID_REPLICA_ASSIGNMENT, as Kafka. (cohort took an empty list as no
// assignment and never checked the lists.)
func TestCreatePartitionsAssignments(t *testing.T) {
	ts := startServer(t)
	createTopic(t, ts.srv.Catalog(), "g", 1, nil)
	mk := func(count int32, reps ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "g", count
		rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{}
		for _, r := range reps {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: r})
		}
		return rt
	}
	for name, tp := range map[string]kmsg.CreatePartitionsRequestTopic{
		"empty list":     mk(2),
		"empty replicas": mk(2, []int32{}),
		"dup broker":     mk(2, []int32{0, 0}),
		"unknown broker": mk(2, []int32{9}),
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = true
		req.Topics = []kmsg.CreatePartitionsRequestTopic{tp}
		resp := ts.dial(t).roundTrip(req).(*kmsg.CreatePartitionsResponse)
		if c := resp.Topics[0].ErrorCode; c != 39 {
			t.Errorf("%s: error %d, want 39", name, c)
		}
	}
}

// Topic names over the wire, Kafka's rules: 249 characters at most, and a
// name colliding with an existing one once '.' and '_' are taken as equal
// is INVALID_TOPIC_EXCEPTION, until that topic is deleted; a count of 0 is
// INVALID_PARTITIONS, validate-only or not.
func TestCreateTopicsNameRulesOverTheWire(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	create := func(validate bool, topics ...kmsg.CreateTopicsRequestTopic) string {
		return createCodes(c.roundTrip(createReq(validate, topics...)).(*kmsg.CreateTopicsResponse))
	}
	long := strings.Repeat("x", 249)
	if got := create(false, newTopic(long, 1), newTopic(long+"y", 1), newTopic("a_b", 1)); got != long+"=0,"+long+"y=17,a_b=0" {
		t.Fatalf("lengths: %s", got)
	}
	for _, validate := range []bool{true, false} {
		if got := create(validate, newTopic("a.b", 1), newTopic("zero", 0)); got != "a.b=17,zero=37" {
			t.Fatalf("validate-only %v: %s, want a.b=17 (collides with a_b), zero=37", validate, got)
		}
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TopicNames = []string{"a_b"}
	if r := c.roundTrip(del).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("deleting a_b: %d", r.Topics[0].ErrorCode)
	}
	if got := create(false, newTopic("a.b", 1)); got != "a.b=0" {
		t.Fatalf("a.b after a_b was deleted: %s", got)
	}
}
