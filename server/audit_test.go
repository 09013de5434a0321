package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Administrative changes are logged with the principal and host they came
// from, once done: a refused or validate-only change is not, and of a config
// change only the names, never the values.
func TestAuditLog(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	var jsonBuf testlog.Buffer // the same lines as a log collector reads them
	log := slog.New(slog.NewMultiHandler(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil), slog.NewJSONHandler(&jsonBuf, nil)))
	ts := startServer(t, func(c *Config) { c.Logger = log })
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		switch r := req.(type) {
		case *kmsg.DeleteGroupsRequest:
			resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
			for _, g := range r.Groups {
				rg := kmsg.NewDeleteGroupsResponseGroup()
				rg.Group = g
				if g == "busy" {
					rg.ErrorCode = 68 // NON_EMPTY_GROUP
				}
				resp.Groups = append(resp.Groups, rg)
			}
			return resp, nil
		case *kmsg.LeaveGroupRequest:
			resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			for _, m := range r.Members {
				rm := kmsg.NewLeaveGroupResponseMember()
				rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
				if m.InstanceID != nil && *m.InstanceID == "gone" {
					rm.ErrorCode = 25 // UNKNOWN_MEMBER_ID
				}
				resp.Members = append(resp.Members, rm)
			}
			return resp, nil
		case *kmsg.OffsetDeleteRequest:
			resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
			for _, rt := range r.Topics {
				t := kmsg.NewOffsetDeleteResponseTopic()
				t.Topic = rt.Topic
				for _, p := range rt.Partitions {
					rp := kmsg.NewOffsetDeleteResponseTopicPartition()
					rp.Partition = p.Partition
					if p.Partition == 1 {
						rp.ErrorCode = 86 // GROUP_SUBSCRIBED_TO_TOPIC
					}
					t.Partitions = append(t.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, t)
			}
			return resp, nil
		}
		return req.ResponseKind(), nil
	}
	c := ts.dial(t)

	create := func(name string, validate bool) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(7)
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
		req.Topics, req.ValidateOnly = append(req.Topics, rt), validate
		c.roundTrip(req)
	}
	create("orders", false)
	create("orders", false) // exists: refused, not logged again
	create("dry-run", true)
	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.SetVersion(3)
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "orders", 5
	grow.Topics = append(grow.Topics, gt)
	c.roundTrip(grow)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.SetVersion(1)
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g1"
	ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "consumer.session.timeout.ms", kmsg.StringPtr("47123")
	ar.Configs = append(ar.Configs, ac)
	alter.Resources = append(alter.Resources, ar)
	if r := c.roundTrip(alter).(*kmsg.IncrementalAlterConfigsResponse); r.Resources[0].ErrorCode != errNone {
		t.Fatalf("altering g1's configs: error %d", r.Resources[0].ErrorCode)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.SetVersion(2)
	dg.Groups = []string{"old", "busy"}
	c.roundTrip(dg)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(5)
	leave.Group = "static"
	for _, m := range [][2]string{{"", "i1"}, {"", "gone"}, {"m1", ""}, {"m2", "i2"}} {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m[0]
		if m[1] != "" {
			lm.InstanceID = kmsg.StringPtr(m[1])
		}
		leave.Members = append(leave.Members, lm)
	}
	c.roundTrip(leave) // i1 removed by an administrator; gone unknown; m1 and m2 left by themselves
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "old2"
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = "orders"
	for _, p := range []int32{0, 1, 2} {
		op := kmsg.NewOffsetDeleteRequestTopicPartition()
		op.Partition = p
		odt.Partitions = append(odt.Partitions, op)
	}
	od.Topics = append(od.Topics, odt)
	c.roundTrip(od)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("orders")
	del.Topics = append(del.Topics, dt)
	c.roundTrip(del)
	c.roundTrip(del) // gone: refused, not logged

	mu.Lock()
	out := buf.String()
	mu.Unlock()
	count := func(s string) int { return strings.Count(out, s) }
	want := map[string]int{
		`msg="topic created" topic=orders partitions=2 by=`:                          1,
		`msg="partitions added" topic=orders partitions=5 by=`:                       1,
		`msg="group deleted" group=old by=`:                                          1,
		`msg="committed offsets deleted" group=old2 topic_partitions=orders/0,2 by=`: 1,
		`msg="topic deleted" topic=orders by=`:                                       1,
		"dry-run":                                                                    0,
		"group=busy":                                                                 0,
		`msg="member removed" group=static instance=i1 by=`:                          1,
		"instance=gone":                                                              0,
		"instance=i2":                                                                0,
		"47123":                                                                      0, // a config's value
		`msg="configs altered" resource_type=group resource=g1 configs=consumer.session.timeout.ms(set) by=`: 1,
		" by=User:ANONYMOUS host=127.0.0.1": 7,
	}
	for s, n := range want {
		if got := count(s); got != n {
			t.Errorf("%q logged %d times, want %d", s, got, n)
		}
	}
	// A key holds one JSON type in every line: a collector that indexes
	// it (Elasticsearch maps a field by its first value) refuses the lines
	// whose value is of another type.
	keyType := map[string]string{}
	for line := range strings.Lines(jsonBuf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		for k, v := range m {
			typ := fmt.Sprintf("%T", v)
			if prev, ok := keyType[k]; ok && prev != typ {
				t.Errorf("key %q is a %s in one line and a %s in %s", k, prev, typ, line)
			}
			keyType[k] = typ
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Log(out)
	}
}
