// Package server is cohort's Kafka wire front end. It accepts TCP (optionally
// TLS) connections, frames and decodes Kafka requests with kmsg, answers the
// cluster-level APIs itself (ApiVersions, Metadata, DescribeCluster, FindCoordinator, the
// topic admin APIs backed by package catalog, and the data-plane APIs that
// present catalog topics as empty topics, dataplane.go) and hands every
// group-scoped request to a Groups implementation (the coordinator). It
// knows nothing about group semantics.
//
// Like a Kafka broker, it answers the requests of one connection in order, one
// at a time: a JoinGroup parked in the coordinator holds its connection, and
// later requests on it wait. It keeps reading the socket meanwhile (a few
// frames ahead) so that a client hanging up cancels the parked request's
// context. A request the server cannot decode, of an unknown API or of an
// unsupported version closes the connection, as Kafka does; only ApiVersions
// gets an UNSUPPORTED_VERSION answer.
package server

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// Client identifies the sender of a request.
type Client struct {
	ID   string // client id from the request header ("" if null)
	Host string // remote IP address, without port (Kafka's clientHost, shown in DescribeGroups as "/1.2.3.4")
	// Principal is the authenticated principal of the connection, e.g.
	// "User:alice" (Anonymous when it authenticated no one).
	Principal string
	// Listener is the name of the listener the client connected on:
	// Metadata and FindCoordinator answer with that listener's endpoints.
	Listener string
}

// Groups serves the group-scoped APIs: OffsetCommit(8), OffsetFetch(9),
// JoinGroup(11), Heartbeat(12), LeaveGroup(13), SyncGroup(14),
// DescribeGroups(15), ListGroups(16), DeleteGroups(42), OffsetDelete(47).
type Groups interface {
	// Handle answers one decoded request (its version already set). It may
	// block for a long time (a JoinGroup parks until its rebalance
	// completes); ctx is cancelled when the client's connection closes or
	// the server shuts down. It returns the request's ResponseKind() with
	// the same version, or an error, which makes the server close the
	// connection. The answer is the server's: it may change it before
	// writing it (OffsetCommit and OffsetFetch v10 get their topic IDs
	// written in), so it must not be shared with another request.
	Handle(ctx context.Context, c Client, req kmsg.Request) (kmsg.Response, error)
}

// GroupsListing is a Groups that can check a principal's access to each
// group while it lists them. The server uses it for a ListGroups carrying
// group.ListFilterTag from a principal that may describe only some groups:
// the filter and its limit then apply as the groups are listed, instead of
// after every group was listed and checked. A Groups without it gets the
// request without the tag, and the server filters what the ACLs kept.
type GroupsListing interface {
	// HandleListGroups answers req as Handle does, with only the groups
	// describes allows: a group it refuses is neither answered nor
	// counted in the response's ListFilterTag. describes is called once
	// per listed group while its coordinator partition is held, one call
	// at a time: it must be quick and must not call back into Groups.
	HandleListGroups(ctx context.Context, c Client, req *kmsg.ListGroupsRequest, describes func(group string) bool) (kmsg.Response, error)
}

// Broker is one node as advertised in Metadata and FindCoordinator.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
	// Endpoints are the node's advertised addresses by listener name. A
	// client is given the endpoint of the listener it connected on; a
	// broker without one for that listener is left out, as Kafka does.
	// Empty: Host and Port serve every listener.
	Endpoints []Endpoint
}

// Endpoint is a broker's advertised address on one listener.
type Endpoint struct {
	Listener string
	Host     string
	Port     int32
}

// on returns the broker as a client of listener sees it: Host and Port
// are its endpoint there. false: the broker has no such endpoint.
func (b Broker) on(listener string) (Broker, bool) {
	if len(b.Endpoints) == 0 || listener == "" {
		return b, true
	}
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			b.Host, b.Port = e.Host, e.Port
			return b, true
		}
	}
	return Broker{}, false
}

// Topology tells the front end which nodes exist and which one coordinates a
// group. One node alone uses SingleNode; cluster mode supplies its own.
// Implementations must be safe for concurrent use.
type Topology interface {
	ClusterID() string
	// NodeID is this node's id (what Metadata gives clients for it).
	NodeID() int32
	ControllerID() int32
	Brokers() []Broker
	// Coordinator returns the node coordinating the group key, or a Kafka
	// error code (e.g. 15 COORDINATOR_NOT_AVAILABLE) when none does right
	// now.
	Coordinator(groupID string) (Broker, int16)
}

// SingleNodeTopology is the Topology of a cohort running alone: one broker
// that is controller and coordinator of every group. Its broker can be
// replaced after the listener is bound (SetSelf), so that a server listening
// on port 0 can advertise the port it got.
type SingleNodeTopology struct {
	clusterID string
	self      atomic.Pointer[Broker]
}

// SingleNode returns the topology of one node, self, in cluster clusterID.
func SingleNode(self Broker, clusterID string) *SingleNodeTopology {
	t := &SingleNodeTopology{clusterID: clusterID}
	t.SetSelf(self)
	return t
}

// SetSelf replaces the advertised broker. It is safe to call while serving.
func (t *SingleNodeTopology) SetSelf(self Broker) {
	if self.Rack != nil {
		r := *self.Rack
		self.Rack = &r
	}
	self.Endpoints = append([]Endpoint(nil), self.Endpoints...)
	t.self.Store(&self)
}

// Self returns the advertised broker.
func (t *SingleNodeTopology) Self() Broker { return *t.self.Load() }

// ClusterID implements Topology.
func (t *SingleNodeTopology) ClusterID() string { return t.clusterID }

// NodeID implements Topology.
func (t *SingleNodeTopology) NodeID() int32 { return t.self.Load().NodeID }

// ControllerID implements Topology: the node itself.
func (t *SingleNodeTopology) ControllerID() int32 { return t.self.Load().NodeID }

// Brokers implements Topology: the node itself.
func (t *SingleNodeTopology) Brokers() []Broker { return []Broker{*t.self.Load()} }

// Coordinator implements Topology: the node coordinates every group.
func (t *SingleNodeTopology) Coordinator(string) (Broker, int16) { return *t.self.Load(), 0 }

// APIVersions is one API key and the inclusive range of versions cohort
// serves for it.
type APIVersions struct {
	Key      int16
	Name     string
	Min, Max int16
}

// Kafka API keys cohort serves.
const (
	keyProduce              int16 = 0
	keyFetch                int16 = 1
	keyListOffsets          int16 = 2
	keyOffsetForLeaderEpoch int16 = 23

	keyOffsetCommit            int16 = 8
	keyOffsetFetch             int16 = 9
	keyMetadata                int16 = 3
	keyFindCoordinator         int16 = 10
	keyJoinGroup               int16 = 11
	keyHeartbeat               int16 = 12
	keyLeaveGroup              int16 = 13
	keySyncGroup               int16 = 14
	keyDescribeGroups          int16 = 15
	keyListGroups              int16 = 16
	keyApiVersions             int16 = 18
	keyCreateTopics            int16 = 19
	keyDeleteTopics            int16 = 20
	keyCreatePartitions        int16 = 37
	keyDescribeConfigs         int16 = 32
	keyAlterConfigs            int16 = 33
	keyIncrementalAlterConfigs int16 = 44
	keyDeleteGroups            int16 = 42
	keyOffsetDelete            int16 = 47
	keyDescribeClientQuotas    int16 = 48
	keyDescribeCluster         int16 = 60

	keySaslHandshake    int16 = 17
	keySaslAuthenticate int16 = 36
	keyDescribeACLs     int16 = 29
	keyCreateACLs       int16 = 30
	keyDeleteACLs       int16 = 31
	keyDescribeSCRAM    int16 = 50
	keyAlterSCRAM       int16 = 51

	keyConsumerGroupHeartbeat int16 = 68
	keyConsumerGroupDescribe  int16 = 69
	keyListConfigResources    int16 = 74
)

// supported is the one table of what cohort advertises, in key order. No
// telemetry. The consumer group protocol (KIP-848: ConsumerGroupHeartbeat,
// ConsumerGroupDescribe) is advertised with the finalized feature
// group.version 1 that clients look for (apiVersions). The data-plane APIs (Produce, Fetch,
// ListOffsets, OffsetForLeaderEpoch) present catalog topics as empty
// topics and refuse every Produce (dataplane.go). Produce is advertised
// although cohort takes no records: librdkafka enables Fetch v4+ (its
// MsgVer2 feature) only when the broker also advertises Produce v3, and
// without it spins on Fetch requests it cannot send; every Kafka broker
// advertises it, and a producer gets a clear error either way. Produce and
// Fetch start where Kafka 4 starts them (v3, v4).
// The SASL and security admin APIs are advertised on every listener, as
// Kafka does: on a listener without SASL a SaslHandshake is answered
// ILLEGAL_SASL_STATE, and without a security store the admin APIs answer
// SECURITY_DISABLED.
// OffsetCommit v0-1 and OffsetFetch v0 (ZooKeeper-era storage) are left out,
// as Kafka 4 does. OffsetCommit and OffsetFetch v10 name topics by ID, which
// the server resolves against the catalog before anything else reads the
// request (topicids.go). Every Max here is within kmsg's MaxVersion (checked by a
// test).
var supported = [...]APIVersions{
	{keyProduce, "Produce", 3, 13},
	{keyFetch, "Fetch", 4, 18},
	{keyListOffsets, "ListOffsets", 0, 11},
	{keyMetadata, "Metadata", 0, 13},
	{keyOffsetCommit, "OffsetCommit", 2, 10},
	{keyOffsetFetch, "OffsetFetch", 1, 10},
	{keyFindCoordinator, "FindCoordinator", 0, 6},
	{keyJoinGroup, "JoinGroup", 0, 9},
	{keyHeartbeat, "Heartbeat", 0, 4},
	{keyLeaveGroup, "LeaveGroup", 0, 5},
	{keySyncGroup, "SyncGroup", 0, 5},
	{keyDescribeGroups, "DescribeGroups", 0, 6},
	{keyListGroups, "ListGroups", 0, 5},
	{keySaslHandshake, "SASLHandshake", 0, 1},
	{keyApiVersions, "ApiVersions", 0, 5},
	{keyCreateTopics, "CreateTopics", 0, 7},
	{keyDeleteTopics, "DeleteTopics", 0, 6},
	{keyOffsetForLeaderEpoch, "OffsetForLeaderEpoch", 0, 4},
	{keyDescribeACLs, "DescribeACLs", 0, 3},
	{keyCreateACLs, "CreateACLs", 0, 3},
	{keyDeleteACLs, "DeleteACLs", 0, 3},
	{keyDescribeConfigs, "DescribeConfigs", 0, 4},
	{keyAlterConfigs, "AlterConfigs", 0, 2},
	{keySaslAuthenticate, "SASLAuthenticate", 0, 2},
	{keyCreatePartitions, "CreatePartitions", 0, 3},
	{keyDeleteGroups, "DeleteGroups", 0, 3},
	{keyIncrementalAlterConfigs, "IncrementalAlterConfigs", 0, 1},
	{keyOffsetDelete, "OffsetDelete", 0, 0},
	{keyDescribeClientQuotas, "DescribeClientQuotas", 0, 1},
	{keyDescribeSCRAM, "DescribeUserSCRAMCredentials", 0, 0},
	{keyAlterSCRAM, "AlterUserSCRAMCredentials", 0, 0},
	{keyDescribeCluster, "DescribeCluster", 0, 2},
	{keyConsumerGroupHeartbeat, "ConsumerGroupHeartbeat", 0, 1},
	{keyConsumerGroupDescribe, "ConsumerGroupDescribe", 0, 1},
	{keyListConfigResources, "ListConfigResources", 0, 1},
}

// maxKey bounds the per-key lookup tables.
const maxKey = 75

// byKey[k] points into supported, nil for unsupported keys.
var byKey [maxKey]*APIVersions

func init() {
	for i := range supported {
		byKey[supported[i].Key] = &supported[i]
	}
}

// SupportedAPIs returns the APIs and versions cohort advertises in
// ApiVersions, sorted by key. The result is a copy.
func SupportedAPIs() []APIVersions {
	out := make([]APIVersions, len(supported))
	copy(out, supported[:])
	return out
}

// lookupAPI returns the advertised range of key, or nil.
func lookupAPI(key int16) *APIVersions {
	if key < 0 || int(key) >= len(byKey) {
		return nil
	}
	return byKey[key]
}

// isGroupKey reports whether key is served by Groups (group.LookupAPI
// describes every group-scoped API).
func isGroupKey(key int16) bool { return group.LookupAPI(key) != nil }
