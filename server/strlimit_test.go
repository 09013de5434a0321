package server

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testlog"
)

// A flexible request may encode a string of any length, but Kafka refuses one
// over 32,767 bytes as an invalid request, and so does cohort: the connection
// closes and nothing reaches the coordinator. One of exactly 32,767 bytes is
// served.
func TestOverlongStringsCloseTheConnection(t *testing.T) {
	ts := startServer(t)
	long := strings.Repeat("g", maxStringLen+1)
	limit := strings.Repeat("g", maxStringLen)

	join := func(group string) kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.SetVersion(6)
		r.Group, r.ProtocolType = group, "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
		return r
	}
	commitMeta := kmsg.NewPtrOffsetCommitRequest()
	commitMeta.SetVersion(8)
	commitMeta.Group = "g"
	commitMeta.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 1}, {Partition: 1, Offset: 1, Metadata: &long},
	}}}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(5)
	describe.Groups = []string{"a", long}
	heartbeat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	heartbeat.Group, heartbeat.MemberID, heartbeat.MemberEpoch = "g", "m", 0
	heartbeat.SubscribedTopicNames = []string{"t", long}

	cases := map[string]kmsg.Request{
		"JoinGroup v6 group id":                        join(long),
		"OffsetCommit v8 partition metadata":           commitMeta,
		"DescribeGroups v5 second group":               describe,
		"ConsumerGroupHeartbeat subscribed topic name": heartbeat,
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			c := ts.dial(t)
			c.send(req, 1)
			c.expectClosed()
		})
	}
	if calls := ts.groups.snapshot(); len(calls) != 0 {
		t.Fatalf("%d requests with over-long strings reached the coordinator (first: %s)", len(calls), kmsg.NameForKey(calls[0].key))
	}

	c := ts.dial(t)
	resp := c.roundTrip(join(limit)).(*kmsg.JoinGroupResponse)
	if !strings.HasPrefix(resp.MemberID, "member-of-ggg") { // the fake's member id, cut to fit
		t.Fatalf("a 32,767-byte group id was not served: member id of %d bytes", len(resp.MemberID))
	}
}

// BenchmarkCheckStrings measures the walk over the largest common request it
// runs on: an OffsetCommit of 2,000 partitions (a 40 KB body), next to the
// decoding of the same body.
func BenchmarkCheckStrings(b *testing.B) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group = "g"
	for ti := range 20 {
		tp := kmsg.OffsetCommitRequestTopic{Topic: "topic-" + strings.Repeat("x", ti)}
		for p := range 100 {
			meta := ""
			tp.Partitions = append(tp.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: int32(p), Offset: 1 << 40, Metadata: &meta})
		}
		req.Topics = append(req.Topics, tp)
	}
	body := req.AppendTo(nil)
	if len(body) <= maxStringLen {
		b.Fatalf("body of %d bytes is not checked", len(body))
	}
	b.Run("decode", func(b *testing.B) {
		for range b.N {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.SetVersion(8)
			if err := r.ReadFrom(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		for range b.N {
			if err := checkStrings(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// checkStrings names the field that is too long, wherever it is; for
// OffsetCommit its fast path must see every string field the walk sees.
func TestCheckStringsNamesTheField(t *testing.T) {
	long := strings.Repeat("x", maxStringLen+1)
	commit := func(set func(*kmsg.OffsetCommitRequest)) *kmsg.OffsetCommitRequest {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{}, {}}}}
		set(r)
		return r
	}
	cases := []struct {
		req  any
		want string
	}{
		{commit(func(r *kmsg.OffsetCommitRequest) { r.Group = long }), "OffsetCommitRequest.Group"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.MemberID = long }), "OffsetCommitRequest.MemberID"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.InstanceID = &long }), "OffsetCommitRequest.InstanceID"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.Topics[0].Topic = long }), "OffsetCommitRequest.Topics.Topic"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.Topics[0].Partitions[1].Metadata = &long }), "OffsetCommitRequest.Topics.Partitions.Metadata"},
		{&kmsg.JoinGroupRequest{Protocols: []kmsg.JoinGroupRequestProtocol{{Name: "a"}, {Name: long}}}, "JoinGroupRequest.Protocols.Name"},
		{&kmsg.ConsumerGroupHeartbeatRequest{SubscribedTopicRegex: &long}, "ConsumerGroupHeartbeatRequest.SubscribedTopicRegex"},
	}
	for _, c := range cases {
		err := checkStrings(c.req)
		if err == nil || !strings.HasPrefix(err.Error(), c.want+" is a string of 32768 bytes") {
			t.Errorf("%s too long: got %v", c.want, err)
		}
	}
	// Every string field of an OffsetCommit, as the reflective walk finds
	// them, is one the cases above make too long.
	fields := stringFields(reflect.TypeFor[kmsg.OffsetCommitRequest]())
	for _, f := range fields {
		if !slices.ContainsFunc(cases, func(c struct {
			req  any
			want string
		}) bool {
			return c.want == f
		}) {
			t.Errorf("OffsetCommit's string field %s is not covered", f)
		}
	}
	if len(fields) != 5 {
		t.Errorf("found %d string fields in OffsetCommitRequest: %q", len(fields), fields)
	}
	if err := checkStrings(commit(func(*kmsg.OffsetCommitRequest) {})); err != nil {
		t.Errorf("a request without long strings: %v", err)
	}
}

// A string in a response longer than the protocol allows is cut to fit, at a
// rune boundary: in a flexible response (an error message) it would fail
// Kafka's Java client, in a non-flexible one (a group id in ListGroups v2) its
// int16 length would wrap and corrupt the whole frame. The other fields and
// entries are written as they are.
func TestOverlongResponseStringsAreCut(t *testing.T) {
	ts := startServer(t)
	long := strings.Repeat("é", maxStringLen) // two bytes a rune: a cut at the limit would split one
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		switch r := req.(type) {
		case *kmsg.DescribeGroupsRequest:
			resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
			for _, g := range r.Groups {
				d := kmsg.NewDescribeGroupsResponseGroup()
				d.Group, d.ErrorCode, d.ErrorMessage = g, 69, kmsg.StringPtr("group "+long+" not found")
				resp.Groups = append(resp.Groups, d)
			}
			return resp, nil
		case *kmsg.ListGroupsRequest:
			resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
			resp.Groups = []kmsg.ListGroupsResponseGroup{{Group: long, ProtocolType: "consumer"}, {Group: "short", ProtocolType: "consumer"}}
			return resp, nil
		}
		return req.ResponseKind(), nil
	}
	fits := func(field, s string) {
		t.Helper()
		if len(s) > maxStringLen || !utf8.ValidString(s) || !strings.HasSuffix(s, "…") {
			t.Errorf("%s: %d bytes, valid UTF-8 %v, ends %q", field, len(s), utf8.ValidString(s), s[max(0, len(s)-6):])
		}
	}
	c := ts.dial(t)

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(6)
	describe.Groups = []string{"a", "b"}
	dr := c.roundTrip(describe).(*kmsg.DescribeGroupsResponse)
	if len(dr.Groups) != 2 || dr.Groups[0].Group != "a" || dr.Groups[1].Group != "b" {
		t.Fatalf("DescribeGroups v6 answered %d groups", len(dr.Groups))
	}
	for _, g := range dr.Groups {
		fits("DescribeGroups v6 error message", *g.ErrorMessage)
		if !strings.HasPrefix("group "+long, strings.TrimSuffix(*g.ErrorMessage, "…")) {
			t.Error("the cut error message is not the start of the original")
		}
	}

	list := kmsg.NewPtrListGroupsRequest()
	list.SetVersion(2)
	lr := c.roundTrip(list).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 2 || lr.Groups[1].Group != "short" || lr.Groups[1].ProtocolType != "consumer" {
		t.Fatalf("ListGroups v2 answered %+v after the long id", lr.Groups[1:])
	}
	fits("ListGroups v2 group id", lr.Groups[0].Group)
}

// The coordinator's own answer to a DescribeGroups v6 of a missing group whose
// id has the longest length a request may carry quotes the id in its error
// message; what the client reads fits the protocol.
func TestNotFoundMessageOfALongGroupIDFits(t *testing.T) {
	e := newAuthzEnv(t)
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(6)
	describe.Groups = []string{strings.Repeat("g", maxStringLen)}
	resp, err := e.srv.handle(testCtx(t), Client{ID: "cli", Host: aliceHost, Principal: admin},
		&request{key: describe.Key(), version: 6, req: describe})
	if err != nil {
		t.Fatal(err)
	}
	out, cut := appendResponse(nil, 1, resp)
	if len(cut) != 1 || !strings.HasPrefix(cut[0], "DescribeGroupsResponse.Groups.ErrorMessage (") {
		t.Errorf("cut fields %q, want the error message", cut)
	}
	got := kmsg.NewPtrDescribeGroupsResponse()
	got.SetVersion(6)
	if err := got.ReadFrom(out[9:]); err != nil { // size, correlation id, header tags
		t.Fatal(err)
	}
	if orig := resp.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorMessage; len(*orig) <= maxStringLen {
		t.Error("the coordinator's response was written to")
	}
	d := got.Groups[0]
	if d.ErrorCode != 69 || d.Group != describe.Groups[0] || d.ErrorMessage == nil || len(*d.ErrorMessage) > maxStringLen {
		t.Fatalf("code %d, group id of %d bytes, message %v", d.ErrorCode, len(d.Group), d.ErrorMessage != nil)
	}
}

// BenchmarkCutLongStrings measures the walk over the largest common
// responses it runs on, next to encoding them, which every answer pays: the
// leader's JoinGroup answer for 10,000 members (a 1 MB body, checked by a
// typed fast path) and a DescribeGroups of the same group (the reflective
// walk).
func BenchmarkCutLongStrings(b *testing.B) {
	join := kmsg.NewPtrJoinGroupResponse()
	join.SetVersion(9)
	join.Generation, join.Protocol, join.ProtocolType = 3, kmsg.StringPtr("cooperative-sticky"), kmsg.StringPtr("consumer")
	describe := kmsg.NewPtrDescribeGroupsResponse()
	describe.SetVersion(5)
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group, dg.State, dg.ProtocolType, dg.Protocol = "g", "Stable", "consumer", "cooperative-sticky"
	for i := range 10_000 {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = fmt.Sprintf("consumer-%d-0b6f3f4e-8a51-4c7b-9f1a-%012d", i, i)
		m.ProtocolMetadata = make([]byte, 64)
		join.Members = append(join.Members, m)
		d := kmsg.NewDescribeGroupsResponseGroupMember()
		d.MemberID, d.ClientID, d.ClientHost = m.MemberID, fmt.Sprintf("consumer-%d", i), "/127.0.0.1"
		d.ProtocolMetadata, d.MemberAssignment = m.ProtocolMetadata, make([]byte, 64)
		dg.Members = append(dg.Members, d)
	}
	join.LeaderID, join.MemberID = join.Members[0].MemberID, join.Members[0].MemberID
	describe.Groups = []kmsg.DescribeGroupsResponseGroup{dg}
	for _, resp := range []kmsg.Response{join, describe} {
		buf := resp.AppendTo(nil)
		name := strings.TrimSuffix(reflect.TypeOf(resp).Elem().Name(), "Response")
		b.Run(name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				buf = resp.AppendTo(buf[:0])
			}
		})
		b.Run(name+"/cut", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, cut := cutLongStrings(resp); cut != nil {
					b.Fatal(cut)
				}
			}
		})
	}
}

// The JoinGroup answer's fast path sees every string field the reflective
// walk would: each made too long on its own is cut, and the cases cover
// every string field of the type.
func TestCutLongStringsJoinGroupFastPath(t *testing.T) {
	long := strings.Repeat("m", maxStringLen+1)
	join := func(f func(*kmsg.JoinGroupResponse)) *kmsg.JoinGroupResponse {
		r := kmsg.NewPtrJoinGroupResponse()
		r.SetVersion(9)
		r.ProtocolType, r.Protocol, r.LeaderID, r.MemberID = kmsg.StringPtr("consumer"), kmsg.StringPtr("range"), "a", "a"
		r.Members = []kmsg.JoinGroupResponseMember{{MemberID: "a"}, {MemberID: "b", InstanceID: kmsg.StringPtr("i")}}
		f(r)
		return r
	}
	cases := map[string]*kmsg.JoinGroupResponse{
		"JoinGroupResponse.ProtocolType":       join(func(r *kmsg.JoinGroupResponse) { r.ProtocolType = &long }),
		"JoinGroupResponse.Protocol":           join(func(r *kmsg.JoinGroupResponse) { r.Protocol = &long }),
		"JoinGroupResponse.LeaderID":           join(func(r *kmsg.JoinGroupResponse) { r.LeaderID = long }),
		"JoinGroupResponse.MemberID":           join(func(r *kmsg.JoinGroupResponse) { r.MemberID = long }),
		"JoinGroupResponse.Members.MemberID":   join(func(r *kmsg.JoinGroupResponse) { r.Members[1].MemberID = long }),
		"JoinGroupResponse.Members.InstanceID": join(func(r *kmsg.JoinGroupResponse) { r.Members[1].InstanceID = &long }),
	}
	for want, r := range cases {
		fitted, cut := cutLongStrings(r)
		if len(cut) != 1 || cut[0] != want+" (32768 bytes)" {
			t.Errorf("%s too long: cut %q", want, cut)
		}
		if joinHasLongString(fitted.(*kmsg.JoinGroupResponse)) {
			t.Errorf("%s is still too long after the cut", want)
		}
		if !joinHasLongString(r) {
			t.Errorf("%s: the cut wrote to the response it was given", want)
		}
	}
	fields := stringFields(reflect.TypeFor[kmsg.JoinGroupResponse]())
	for _, f := range fields {
		if cases[f] == nil {
			t.Errorf("JoinGroupResponse's string field %s is not covered", f)
		}
	}
	if len(fields) != len(cases) {
		t.Errorf("found %d string fields in JoinGroupResponse: %q", len(fields), fields)
	}
	r := join(func(*kmsg.JoinGroupResponse) {})
	if fitted, cut := cutLongStrings(r); cut != nil || fitted != kmsg.Response(r) {
		t.Errorf("a response without long strings: cut %q", cut)
	}
}

// stringFields lists the paths of the string fields of struct type t as the
// reflective walks find them ("Type.Field.Field").
func stringFields(t reflect.Type) []string {
	var fields []string
	var walk func(reflect.Type, string)
	walk = func(t reflect.Type, path string) {
		switch t.Kind() {
		case reflect.String:
			fields = append(fields, path)
		case reflect.Pointer, reflect.Slice:
			walk(t.Elem(), path)
		case reflect.Struct:
			for _, f := range fieldsWithStrings(t) {
				walk(t.Field(f.i).Type, path+"."+f.name)
			}
		}
	}
	walk(t, t.Name())
	return fields
}

// The warning that a response's strings were cut is logged at most
// burstLogMax times per window over all connections: a client repeating a
// request whose answer quotes its over-long id logged a line per request.
func TestCutStringsLogBounded(t *testing.T) {
	var buf testlog.Buffer
	ts := startServer(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	long := strings.Repeat("g", maxStringLen)
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		r := req.(*kmsg.DescribeGroupsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group, d.ErrorCode, d.ErrorMessage = r.Groups[0], 69, kmsg.StringPtr("group "+long+" not found")
		resp.Groups = append(resp.Groups, d)
		return resp, nil
	}
	c := ts.dial(t)
	for range 3 * burstLogMax {
		describe := kmsg.NewPtrDescribeGroupsRequest()
		describe.SetVersion(6)
		describe.Groups = []string{"g"}
		c.roundTrip(describe)
	}
	if n := strings.Count(buf.String(), "strings too long for the protocol cut"); n != burstLogMax {
		t.Fatalf("%d lines for %d cut answers, want %d", n, 3*burstLogMax, burstLogMax)
	}
}
