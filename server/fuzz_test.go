package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
)

// seedFrames returns well-formed request frames (without the size prefix)
// for every advertised API at every version it advertises, and at each
// flexible version the same request again with unknown tagged fields in
// its header and its body (taggedFrame).
func seedFrames() [][]byte {
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(seedClientID))
	for _, req := range seedRequests() {
		b := f.AppendRequest(nil, req, 42)
		out = append(out, b[4:])
		if req.IsFlexible() {
			out = append(out, taggedFrame(req))
		}
	}
	return out
}

// seedClientID is the client id of the seed frames.
const seedClientID = "seed"

// taggedFrame is req's frame (without the size prefix) with unknown tagged
// fields in the request header and at the top of the body, as a newer
// client may send: a server skips the tags it does not know. req must be
// flexible; it is left as it was.
func taggedFrame(req kmsg.Request) []byte {
	v := reflect.ValueOf(req).Elem()
	field := v.FieldByName("UnknownTags")
	saved := field.Interface().(kmsg.Tags)
	var tags kmsg.Tags
	tags.Set(7, []byte("body"))
	tags.Set(1000, nil)
	field.Set(reflect.ValueOf(tags))
	b := kmsg.NewRequestFormatter(kmsg.FormatterClientID(seedClientID)).AppendRequest(nil, req, 42)[4:]
	field.Set(reflect.ValueOf(saved))
	// The header's tag section follows key, version, correlation id and
	// the client id: one empty section, replaced by two tags.
	at := 10 + len(seedClientID)
	if b[at] != 0 {
		panic("the request header's tags are not where they should be")
	}
	header := []byte{2, 3, 2, 'h', 'i', 0x80, 0x01, 0}
	return append(append(append([]byte(nil), b[:at]...), header...), b[at+1:]...)
}

// seedRequests returns a request for every advertised API at every
// version it advertises, with fields that reach past the first checks.
func seedRequests() []kmsg.Request {
	var out []kmsg.Request
	for _, api := range SupportedAPIs() {
		for v := api.Min; v <= api.Max; v++ {
			req := kmsg.RequestForKey(api.Key)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.CreateTopicsRequest:
				t := kmsg.NewCreateTopicsRequestTopic()
				t.Topic, t.NumPartitions = "new", 2
				r.Topics = append(r.Topics, t)
			case *kmsg.MetadataRequest:
				t := kmsg.NewMetadataRequestTopic()
				t.Topic = kmsg.StringPtr("a")
				r.Topics = append(r.Topics, t)
			case *kmsg.FindCoordinatorRequest:
				r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g", "h"}
			case *kmsg.DescribeGroupsRequest: // cohort's tags: history, its lists' bound, the members' bound
				r.Groups = []string{"g", "h"}
				if v >= 5 {
					group.RequestHistory(r, 3)
					group.RequestHistoryLists(r, 2)
					group.RequestMembers(r, 1)
				}
			case *kmsg.DeleteGroupsRequest: // one named twice
				r.Groups = []string{"g", "h", "g"}
			case *kmsg.DescribeClusterRequest:
				r.IncludeClusterAuthorizedOperations, r.IncludeFencedBrokers = true, true
			case *kmsg.DescribeConfigsRequest:
				for _, rr := range []struct {
					rt   kmsg.ConfigResourceType
					name string
				}{{kmsg.ConfigResourceTypeTopic, "a"}, {kmsg.ConfigResourceTypeBroker, "0"}, {kmsg.ConfigResourceTypeGroupConfig, "g"}} {
					res := kmsg.NewDescribeConfigsRequestResource()
					res.ResourceType, res.ResourceName = rr.rt, rr.name
					r.Resources = append(r.Resources, res)
				}
			case *kmsg.IncrementalAlterConfigsRequest: // a group set and deleted, a null SET, a duplicate, a topic, an unknown type
				g := kmsg.NewIncrementalAlterConfigsRequestResource()
				g.ResourceType, g.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
				set, del, null := kmsg.NewIncrementalAlterConfigsRequestResourceConfig(), kmsg.NewIncrementalAlterConfigsRequestResourceConfig(), kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				set.Name, set.Value = "consumer.session.timeout.ms", kmsg.StringPtr("60000")
				del.Name, del.Op = "consumer.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpDelete
				null.Name = "consumer.assignment.interval.ms"
				g.Configs = append(g.Configs, set, del)
				h := g
				h.ResourceName, h.Configs = "h", []kmsg.IncrementalAlterConfigsRequestResourceConfig{null}
				tp, odd := g, g
				tp.ResourceType, tp.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
				odd.ResourceType = 99
				r.Resources = append(r.Resources, g, h, g, tp, odd)
			case *kmsg.AlterConfigsRequest:
				g := kmsg.NewAlterConfigsRequestResource()
				g.ResourceType, g.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
				c := kmsg.NewAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "consumer.heartbeat.interval.ms", kmsg.StringPtr("3000")
				g.Configs = append(g.Configs, c)
				r.Resources = append(r.Resources, g)
			case *kmsg.ListConfigResourcesRequest:
				if v > 0 {
					r.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig), int8(kmsg.ConfigResourceTypeTopic)}
				}
			case *kmsg.FetchRequest: // a held fetch would wait: MaxWaitMillis stays 0
				t := kmsg.NewFetchRequestTopic()
				t.Topic, t.TopicID = "a", catalog.TopicID("a")
				t.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition(), kmsg.NewFetchRequestTopicPartition()}
				t.Partitions[1].Partition, t.Partitions[1].FetchOffset = 5, 3
				r.Topics = append(r.Topics, t)
			case *kmsg.ListOffsetsRequest:
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = "a"
				t.Partitions = []kmsg.ListOffsetsRequestTopicPartition{kmsg.NewListOffsetsRequestTopicPartition(), kmsg.NewListOffsetsRequestTopicPartition()}
				t.Partitions[0].Timestamp, t.Partitions[1].Partition, t.Partitions[1].Timestamp = -1, 1, -2
				r.Topics = append(r.Topics, t)
			case *kmsg.OffsetForLeaderEpochRequest:
				t := kmsg.NewOffsetForLeaderEpochRequestTopic()
				t.Topic = "b"
				t.Partitions = []kmsg.OffsetForLeaderEpochRequestTopicPartition{kmsg.NewOffsetForLeaderEpochRequestTopicPartition()}
				r.Topics = append(r.Topics, t)
			case *kmsg.ProduceRequest:
				t := kmsg.NewProduceRequestTopic()
				t.Topic, t.TopicID = "a", catalog.TopicID("a")
				t.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
				r.Acks, r.Topics = -1, append(r.Topics, t)
			case *kmsg.OffsetCommitRequest: // partition 3 is not in the catalog's "a"; v10 names it by ID, then an unknown ID
				t := kmsg.NewOffsetCommitRequestTopic()
				t.Topic, t.TopicID = "a", catalog.TopicID("a")
				t.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition(), kmsg.NewOffsetCommitRequestTopicPartition()}
				t.Partitions[1].Partition = 3
				u := kmsg.NewOffsetCommitRequestTopic()
				u.Topic, u.TopicID = "elsewhere", [16]byte{7}
				u.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
				r.Group, r.Topics = "g", append(r.Topics, t, u)
			case *kmsg.OffsetFetchRequest: // v8+: one group by listed topics (one ID unknown), one for all
				if v >= 8 {
					g := kmsg.NewOffsetFetchRequestGroup()
					g.Group = "g"
					g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", TopicID: catalog.TopicID("a"), Partitions: []int32{0, 1}},
						{Topic: "elsewhere", TopicID: [16]byte{7}, Partitions: []int32{0}}}
					all := kmsg.NewOffsetFetchRequestGroup()
					all.Group = "h"
					r.Groups = []kmsg.OffsetFetchRequestGroup{g, all}
				}
			}
			out = append(out, req)
		}
	}
	return out
}

// serveFrame runs one frame through the server's decode, dispatch and
// encode path, as a connection does, and returns the encoded response
// (nil when the frame would close the connection).
func serveFrame(t *testing.T, s *Server, frame []byte) []byte {
	r, err := decodeFrame(frame, "")
	if err != nil {
		return nil
	}
	resp, err := s.handle(context.Background(), Client{ID: r.clientID, Host: "127.0.0.1"}, r)
	if err != nil {
		t.Fatalf("handling a decoded %s v%d failed: %v", kmsg.NameForKey(r.key), r.version, err)
	}
	out, _ := appendResponse(nil, r.corr, resp)
	// The response must decode as what the client asked for.
	if int(binary.BigEndian.Uint32(out)) != len(out)-4 || int32(binary.BigEndian.Uint32(out[4:])) != r.corr {
		t.Fatal("bad response framing")
	}
	body := out[8:]
	check := kmsg.ResponseForKey(r.key)
	check.SetVersion(resp.GetVersion())
	if check.IsFlexible() && r.key != keyApiVersions {
		body = body[1:]
	}
	if err := check.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(r.key), resp.GetVersion(), err)
	}
	if n, path := walkStrings(reflect.ValueOf(check).Elem()); n > 0 {
		t.Fatalf("%s v%d response holds a string of %d bytes (%v), more than the protocol allows", kmsg.NameForKey(r.key), resp.GetVersion(), n, path)
	}
	return out
}

func fuzzServer(t testing.TB) *Server {
	g := newFakeGroups()
	g.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		return req.ResponseKind(), nil
	}
	cat := catalog.New(catalog.Options{})
	cat.Create("a", 2, nil)
	cat.Create("b", 1, [][]string{{"r"}})
	srv, err := New(Config{Groups: g, Topology: SingleNode(Broker{NodeID: 0, Host: "h", Port: 1}, "c"), Catalog: cat, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestSeedFramesServe(t *testing.T) {
	srv := fuzzServer(t)
	for i, f := range seedFrames() {
		if serveFrame(t, srv, f) == nil {
			t.Errorf("seed frame %d (key %d) was rejected", i, int16(binary.BigEndian.Uint16(f)))
		}
	}
}

// TestUnknownTagsChangeNothing sends every flexible version of every
// advertised API with and without unknown tagged fields in its header and
// body: the tags are skipped, and the answer is the same.
func TestUnknownTagsChangeNothing(t *testing.T) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(seedClientID))
	n := 0
	for _, req := range seedRequests() {
		if !req.IsFlexible() {
			continue
		}
		n++
		name := fmt.Sprintf("%s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
		plain := serveFrame(t, fuzzServer(t), f.AppendRequest(nil, req, 42)[4:])
		tagged := serveFrame(t, fuzzServer(t), taggedFrame(req))
		if tagged == nil {
			t.Errorf("%s with unknown tags was refused", name)
			continue
		}
		if !bytes.Equal(plain, tagged) {
			t.Errorf("%s: unknown tags changed the answer:\n%x\n%x", name, plain, tagged)
		}
	}
	if n == 0 {
		t.Fatal("no flexible version advertised")
	}
}

// FuzzServeFrame feeds arbitrary frame bytes through the decode, dispatch
// and encode path with a fake Groups: nothing may panic, and whatever is
// accepted must produce a response that decodes at the requested version.
func FuzzServeFrame(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Add([]byte{0, 18, 0, 9, 0, 0, 0, 1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		// A fresh server per input: admin requests change the catalog.
		serveFrame(t, fuzzServer(t), frame)
	})
}

// FuzzConnStream feeds an arbitrary byte stream to a real connection over an
// in-memory pipe: the connection must end (answer or close) without a panic
// and without hanging.
func FuzzConnStream(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s)
	}
	f.Fuzz(func(t *testing.T, prefix, rest []byte) {
		streamConn(fuzzServer(t), prefix, rest)
	})
}

// streamConn writes the chunks to a real connection of srv's first
// listener over an in-memory pipe, hangs up, reads until the server closes,
// and closes the server.
func streamConn(srv *Server, chunks ...[]byte) {
	srv.cfg.MaxFrameBytes = 1 << 16
	client := pipeConn(srv)
	go func() {
		for _, b := range chunks {
			client.Write(b)
		}
		client.Close() // hang up: whatever is pending is cancelled
	}()
	io.Copy(io.Discard, client)
	srv.Close()
}

// pipeConn starts a connection of srv's first listener over an in-memory
// pipe and returns the client's end.
func pipeConn(srv *Server) net.Conn {
	client, server := net.Pipe()
	srv.mu.Lock()
	srv.wg.Add(1)
	c := newConn(srv, server, &listener{Listener: srv.lcfg[0]})
	srv.conns[c] = struct{}{}
	srv.mu.Unlock()
	go c.run()
	return client
}
