package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/acl"
)

// Kafka error codes the front end answers with.
const (
	errNone                    int16 = 0
	errUnknownServerError      int16 = -1
	errUnknownTopicOrPartition int16 = 3
	errLeaderNotAvailable      int16 = 5
	errCoordinatorNotAvailable int16 = 15
	errInvalidTopic            int16 = 17
	errUnsupportedVersion      int16 = 35
	errTopicAlreadyExists      int16 = 36
	errInvalidPartitions       int16 = 37
	errInvalidReplicationFact  int16 = 38
	errInvalidReplicaAssign    int16 = 39
	errInvalidConfig           int16 = 40
	errNotController           int16 = 41
	errInvalidRequest          int16 = 42
	errPolicyViolation         int16 = 44
	errKafkaStorageError       int16 = 56
	errListenerNotFound        int16 = 72
	errUnknownTopicID          int16 = 100
	errRebootstrapRequired     int16 = 129
)

// Coordinator key types of FindCoordinator.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
	coordinatorShare       int8 = 2
)

// defaultPartitions is the partition count of a topic created with
// NumPartitions -1 (Kafka's num.partitions default).
const defaultPartitions = 1

// handle answers one decoded request, and logs the changes an
// administrative one made (audit).
func (s *Server) handle(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	if !audited(r.key) {
		return s.handleOne(ctx, c, r)
	}
	resp, err := s.handleOne(ctx, c, r)
	if err == nil && resp != nil {
		s.audit(c, r.req, resp)
	}
	return resp, err
}

func (s *Server) handleOne(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	if d, ok := r.req.(*kmsg.DeleteGroupsRequest); ok {
		// Kafka deletes each group once and answers it once, however
		// often the request names it.
		d.Groups = distinct(d.Groups)
		resp, err := s.dispatch(ctx, c, r)
		if err == nil && d.Version >= 3 {
			explainDeleteGroups(resp.(*kmsg.DeleteGroupsResponse))
		}
		return resp, err
	}
	// A group named twice is described (or its offsets fetched) once:
	// Kafka answers every entry, so a 200-byte DescribeGroups naming one
	// group with megabytes of member metadata a hundred times made a
	// 200 MiB answer, and the list bound (maxListEntries) let it be a
	// 100,000-fold one. Clients read answers by group id, so one answer
	// serves every mention.
	switch q := r.req.(type) {
	case *kmsg.DescribeGroupsRequest:
		q.Groups = distinct(q.Groups)
	case *kmsg.ConsumerGroupDescribeRequest:
		q.Groups = distinct(q.Groups)
	case *kmsg.OffsetFetchRequest:
		q.Groups = mergeOffsetFetchGroups(q.Groups)
		byID := q.Version >= 10
		q.Topics = onceEach(q.Topics, func(t *kmsg.OffsetFetchRequestTopic) (string, *[]int32) { return t.Topic, &t.Partitions })
		for i := range q.Groups {
			q.Groups[i].Topics = onceEach(q.Groups[i].Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) (string, *[]int32) {
				if byID {
					return string(t.TopicID[:]), &t.Partitions
				}
				return t.Topic, &t.Partitions
			})
		}
	}
	if r.version >= 10 && (r.key == keyOffsetCommit || r.key == keyOffsetFetch) {
		return s.handleByTopicID(ctx, c, r) // topic IDs to names first (topicids.go)
	}
	if q, ok := r.req.(*kmsg.ListGroupsRequest); ok {
		// cohort's filter (group.ListFilterTag) applies to the list the
		// principal would get: a group it may not describe is neither
		// answered nor counted. A principal that may describe every
		// group (no ACLs, or CLUSTER DESCRIBE) has the coordinator's
		// partitions filter their groups as they list them; so does one
		// that may describe some groups, where Groups checks each group
		// as it lists it (GroupsListing, authzListGroups). Otherwise the
		// partitions list every group, without the tag, and the filter
		// applies to what the ACLs kept.
		_, listing := s.cfg.Groups.(GroupsListing)
		if f, ok := group.ListFilterRequested(q); ok && s.authz != nil && !listing &&
			!s.allowed(c, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
			q.UnknownTags = kmsg.Tags{}
			resp, err := s.dispatch(ctx, c, r)
			if lr, isList := resp.(*kmsg.ListGroupsResponse); err == nil && isList && lr.ErrorCode == errNone {
				group.FilterList(lr, f)
			}
			return resp, err
		}
	}
	return s.dispatch(ctx, c, r)
}

// dispatch answers r, checking it against the ACLs when they are on.
func (s *Server) dispatch(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	if s.authz != nil {
		return s.handleAuthorized(ctx, c, r)
	}
	return s.handleUnchecked(ctx, c, r)
}

// explainDeleteGroups gives each refused group of a DeleteGroups v3+
// answer an error message: the coordinator's own where it wrote one (a
// group that does not exist, one that has members), otherwise the error
// code's description, as Kafka's default exception message for the code
// reads (a refusal by the ACLs, a group another node coordinates, a failed
// write). A code kerr does not know keeps no message.
func explainDeleteGroups(resp *kmsg.DeleteGroupsResponse) {
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode == errNone || g.ErrorMessage != nil {
			continue
		}
		if e := kerr.TypedErrorForCode(g.ErrorCode); e != nil && e.Code == g.ErrorCode {
			g.ErrorMessage = kmsg.StringPtr(e.Description)
		}
	}
}

// onceEach merges the entries of ts naming the same topic (key: its name,
// or its ID where topics are named by ID) into the first and lists each of
// their partitions once, first mention first. It returns ts itself when
// nothing repeats, else new slices (the request's own are left as they
// are). Every answer built from the request, the coordinator's and the
// server's own refusals alike, then names each partition once.
func onceEach[T any](ts []T, topic func(*T) (string, *[]int32)) []T {
	repeats := false
	seenTopic := make(map[string]int, len(ts))
	for i := range ts {
		k, ps := topic(&ts[i])
		if _, ok := seenTopic[k]; ok || hasRepeat(*ps) {
			repeats = true
			break
		}
		seenTopic[k] = i
	}
	if !repeats {
		return ts
	}
	first := make(map[string]int, len(ts))
	out := make([]T, 0, len(ts))
	for _, t := range ts {
		k, ps := topic(&t)
		i, ok := first[k]
		if !ok {
			first[k] = len(out)
			*ps = slices.Clone(*ps)
			out = append(out, t)
			continue
		}
		_, into := topic(&out[i])
		*into = append(*into, *ps...)
	}
	for i := range out {
		_, ps := topic(&out[i])
		*ps = withoutRepeats(*ps)
	}
	return out
}

// hasRepeat reports whether ps lists a partition twice.
func hasRepeat(ps []int32) bool {
	if len(ps) < 2 {
		return false
	}
	seen := make(map[int32]struct{}, len(ps))
	for _, p := range ps {
		if _, ok := seen[p]; ok {
			return true
		}
		seen[p] = struct{}{}
	}
	return false
}

// withoutRepeats keeps the first mention of each partition of ps (which
// it may reorder in place: ps is the caller's own copy).
func withoutRepeats(ps []int32) []int32 {
	if len(ps) < 2 {
		return ps
	}
	seen := make(map[int32]struct{}, len(ps))
	out := ps[:0]
	for _, p := range ps {
		if _, ok := seen[p]; !ok {
			seen[p] = struct{}{}
			out = append(out, p)
		}
	}
	return out
}

// mergeOffsetFetchGroups merges the entries of an OffsetFetch (v8+) that
// name the same group into its first: the topics of all of them (all topics
// when one asks for all), its member id and epoch. The answer then holds
// each group once, with every partition any of its entries asked for.
func mergeOffsetFetchGroups(gs []kmsg.OffsetFetchRequestGroup) []kmsg.OffsetFetchRequestGroup {
	if len(gs) < 2 {
		return gs
	}
	first := make(map[string]int, len(gs))
	out := gs[:0:0]
	for _, g := range gs {
		i, seen := first[g.Group]
		if !seen {
			first[g.Group] = len(out)
			out = append(out, g)
			continue
		}
		switch m := &out[i]; {
		case m.Topics == nil:
		case g.Topics == nil:
			m.Topics = nil
		default:
			m.Topics = append(m.Topics[:len(m.Topics):len(m.Topics)], g.Topics...)
		}
	}
	if len(out) == len(gs) {
		return gs
	}
	return out
}

// distinct returns ids without repeats, in first-seen order.
func distinct(ids []string) []string {
	if len(ids) < 2 {
		return ids
	}
	seen := make(map[string]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// handleUnchecked answers r without authorization checks.
func (s *Server) handleUnchecked(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	switch r.key {
	case keyApiVersions:
		return apiVersions(r, s.cfg.Topology), nil
	case keyMetadata:
		return s.metadata(c, r.req.(*kmsg.MetadataRequest)), nil
	case keyDescribeCluster:
		return s.describeCluster(c, r.req.(*kmsg.DescribeClusterRequest)), nil
	case keyFindCoordinator:
		return s.findCoordinator(c, r.req.(*kmsg.FindCoordinatorRequest)), nil
	case keyCreateTopics:
		return s.createTopics(r.req.(*kmsg.CreateTopicsRequest)), nil
	case keyDeleteTopics:
		return s.deleteTopics(r.req.(*kmsg.DeleteTopicsRequest)), nil
	case keyCreatePartitions:
		return s.createPartitions(r.req.(*kmsg.CreatePartitionsRequest)), nil
	case keyDescribeConfigs:
		return s.describeConfigs(r.req.(*kmsg.DescribeConfigsRequest), nil), nil
	case keyListConfigResources:
		return s.listConfigResources(c, r.req.(*kmsg.ListConfigResourcesRequest)), nil
	case keyDescribeClientQuotas:
		return s.describeClientQuotas(r.req.(*kmsg.DescribeClientQuotasRequest)), nil
	case keyAlterConfigs:
		return s.legacyAlterConfigs(c, r), nil
	case keyIncrementalAlterConfigs:
		return s.incrementalAlterConfigs(c, r), nil
	case keyDescribeACLs:
		return s.describeACLs(c, r.req.(*kmsg.DescribeACLsRequest)), nil
	case keyCreateACLs:
		return s.createACLs(ctx, c, r.req.(*kmsg.CreateACLsRequest)), nil
	case keyDeleteACLs:
		return s.deleteACLs(ctx, c, r.req.(*kmsg.DeleteACLsRequest)), nil
	case keyDescribeSCRAM:
		return s.describeUserSCRAMCredentials(c, r.req.(*kmsg.DescribeUserSCRAMCredentialsRequest)), nil
	case keyAlterSCRAM:
		return s.alterUserSCRAMCredentials(ctx, c, r.req.(*kmsg.AlterUserSCRAMCredentialsRequest)), nil
	case keyFetch:
		return s.fetch(r.req.(*kmsg.FetchRequest), nil), nil
	case keyListOffsets:
		return s.listOffsets(r.req.(*kmsg.ListOffsetsRequest), nil), nil
	case keyOffsetForLeaderEpoch:
		return s.offsetForLeaderEpoch(r.req.(*kmsg.OffsetForLeaderEpochRequest), nil), nil
	case keyProduce:
		return s.produce(r.req.(*kmsg.ProduceRequest), nil), nil
	case keyOffsetCommit:
		return s.commitInCatalog(ctx, c, r)
	case keyOffsetDelete:
		return s.offsetDeleteInCatalog(ctx, c, r)
	case keySaslHandshake, keySaslAuthenticate:
		// The connection answers these itself (they change its state);
		// here only when called without one.
		resp := r.req.ResponseKind()
		if h, ok := resp.(*kmsg.SASLHandshakeResponse); ok {
			h.ErrorCode = errIllegalSaslState
		} else {
			resp.(*kmsg.SASLAuthenticateResponse).ErrorCode = errIllegalSaslState
		}
		return resp, nil
	}
	return s.groupsHandle(ctx, c, r)
}

// groupsHandle hands a group-scoped request to Groups and checks its answer.
func (s *Server) groupsHandle(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	if !isGroupKey(r.key) { // decodeFrame admits only the keys in supported
		return nil, fmt.Errorf("no handler for API key %d", r.key)
	}
	resp, err := s.cfg.Groups.Handle(ctx, c, r.req)
	return s.groupsAnswer(r, resp, err)
}

// groupsAnswer checks an answer of Groups to r.
func (s *Server) groupsAnswer(r *request, resp kmsg.Response, err error) (kmsg.Response, error) {
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("BUG: Groups.Handle returned neither a response nor an error")
	}
	if resp.Key() != r.key || resp.GetVersion() != r.version {
		return nil, fmt.Errorf("BUG: Groups.Handle answered %s v%d with %s v%d",
			kmsg.NameForKey(r.key), r.version, kmsg.NameForKey(resp.Key()), resp.GetVersion())
	}
	return resp, nil
}

// apiVersionKeys is the advertised key list, shared by every ApiVersions
// response (encoding only reads it).
var apiVersionKeys = func() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, len(supported))
	for i, a := range supported {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.Min, a.Max
		keys[i] = k
	}
	return keys
}()

// apiVersions answers ApiVersions; topo is this node's, for the v5 check.
func apiVersions(r *request, topo Topology) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	if r.req == nil { // a version cohort does not serve
		// As Kafka (KIP-511): UNSUPPORTED_VERSION at v0 with the range of
		// ApiVersions alone, all a client needs to ask again.
		resp.SetVersion(0)
		resp.ErrorCode = errUnsupportedVersion
		resp.ApiKeys = apiVersionsKeyOnly
		return resp
	}
	resp.SetVersion(r.version)
	req := r.req.(*kmsg.ApiVersionsRequest)
	if req.Version >= 3 && (!validSoftware(req.ClientSoftwareName) || !validSoftware(req.ClientSoftwareVersion)) {
		// Kafka refuses a v3+ request whose client software name
		// or version is not a word of letters, digits, '-' and
		// '.': INVALID_REQUEST, and no API list.
		resp.ErrorCode = errInvalidRequest
		return resp
	}
	if req.Version >= 5 {
		// KIP-1242: a client that knows which cluster and node it
		// meant to reach names both (a bootstrap connection names
		// neither). One without the other is INVALID_REQUEST; a
		// cluster or node that is not this one is
		// REBOOTSTRAP_REQUIRED, so that a client whose address now
		// reaches another node starts again from its bootstrap
		// servers. No API list either way.
		named, nodeNamed := req.ClusterID != nil, req.NodeID != -1
		switch {
		case named != nodeNamed:
			resp.ErrorCode = errInvalidRequest
			return resp
		case named && (*req.ClusterID != topo.ClusterID() || req.NodeID != topo.NodeID()):
			resp.ErrorCode = errRebootstrapRequired
			return resp
		}
	}
	resp.ApiKeys = apiVersionKeys
	if resp.Version >= 3 {
		// KIP-584 features: group.version 1 says the consumer group
		// protocol (KIP-848) is enabled, as Kafka 4 brokers report it.
		// The finalized set never changes, so its epoch is constant.
		resp.SupportedFeatures = supportedFeatures
		if resp.Version < 4 {
			// A supported range starting at 0 is left out below v4, as
			// Kafka does (KAFKA-17492): Java clients 3.3 to 3.7, which
			// send v3, fail to read one. The finalized level stays.
			resp.SupportedFeatures = supportedFeaturesV3
		}
		resp.FinalizedFeatures = finalizedFeatures
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp
}

// validSoftware reports whether an ApiVersions v3+ client software name or
// version is well formed, by Kafka's rule: letters, digits, '-' and '.',
// starting and ending with a letter or digit.
func validSoftware(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' }
	for i := 0; i < len(s); i++ {
		if !alnum(s[i]) && s[i] != '-' && s[i] != '.' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

var (
	supportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "group.version", MinVersion: 0, MaxVersion: 1}}
	finalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "group.version", MinVersionLevel: 1, MaxVersionLevel: 1}}
	// supportedFeaturesV3 is supportedFeatures without the ranges that
	// start at 0.
	supportedFeaturesV3 = func() []kmsg.ApiVersionsResponseSupportedFeature {
		var out []kmsg.ApiVersionsResponseSupportedFeature
		for _, f := range supportedFeatures {
			if f.MinVersion > 0 {
				out = append(out, f)
			}
		}
		return out
	}()
	// apiVersionsKeyOnly is the key list of the answer to an ApiVersions
	// request of a version cohort does not serve.
	apiVersionsKeyOnly = func() []kmsg.ApiVersionsResponseApiKey {
		for _, k := range apiVersionKeys {
			if k.ApiKey == 18 {
				return []kmsg.ApiVersionsResponseApiKey{k}
			}
		}
		panic("ApiVersions is not advertised")
	}()
)

func errorMessage(code int16) *string {
	if e := kerr.TypedErrorForCode(code); e != nil {
		return kmsg.StringPtr(e.Message)
	}
	return nil
}

// metadata answers Metadata from the topology and the catalog. Every
// partition is led by one broker; replicas and ISR are the leader alone,
// unless the catalog gives the partition racks, in which case the replicas
// are the brokers in those racks (so rack-aware assignors see the racks
// through the brokers' Rack field, the way Kafka exposes them).
func (s *Server) metadata(c Client, req *kmsg.MetadataRequest) kmsg.Response {
	resp := s.metadataTopics(c, req)
	// Authorized operations, when asked for: without an authorizer every
	// operation Kafka defines, as Kafka answers (authzMetadata replaces
	// them with the principal's), for every topic answered, unknown ones
	// too, but not in a request refused whole.
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if t := &resp.Topics[i]; t.Topic != nil && t.ErrorCode != errInvalidRequest {
				t.AuthorizedOperations = acl.SupportedOperations(acl.ResourceTopic)
			}
		}
	}
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = acl.SupportedOperations(acl.ResourceCluster)
	}
	return resp
}

// metadataTopics is metadata's brokers and topics.
func (s *Server) metadataTopics(c Client, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	topo := s.cfg.Topology
	brokers := brokersOn(topo.Brokers(), c.Listener)
	resp.Brokers = make([]kmsg.MetadataResponseBroker, len(brokers))
	for i, b := range brokers {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.Brokers[i] = mb
	}
	resp.ClusterID = kmsg.StringPtr(topo.ClusterID())
	resp.ControllerID = topo.ControllerID()

	pl := newPlacer(brokers)
	if len(brokers) == 0 && len(topo.Brokers()) > 0 && req.Version >= 6 {
		// Brokers are up but none has an endpoint on this listener: from
		// v6 Kafka says so (LISTENER_NOT_FOUND) instead of
		// LEADER_NOT_AVAILABLE, so that the client reports a
		// misconfigured listener rather than waiting for a leader.
		pl.noLeader = errListenerNotFound
	}
	all := req.Topics == nil || req.GetVersion() == 0 && len(req.Topics) == 0
	if all {
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, s.catalog.Len())
		s.catalog.Range(func(t *catalog.Topic) bool {
			resp.Topics = append(resp.Topics, pl.topic(t))
			return true
		})
		return resp
	}
	if req.Version == 10 || req.Version == 11 {
		// These versions carry a topic ID field but take no ID, and a
		// name is required: Kafka refuses the whole request
		// (INVALID_REQUEST on every topic asked for).
		if slices.ContainsFunc(req.Topics, func(rt kmsg.MetadataRequestTopic) bool {
			return rt.Topic == nil || rt.TopicID != [16]byte{}
		}) {
			for _, rt := range req.Topics {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, errInvalidRequest
				resp.Topics = append(resp.Topics, mt)
			}
			return resp
		}
	}
	seenName := make(map[string]bool, len(req.Topics))
	seenID := make(map[[16]byte]bool)
	for _, rt := range req.Topics {
		switch {
		case rt.Topic != nil:
			if seenName[*rt.Topic] {
				continue
			}
			seenName[*rt.Topic] = true
			if t, ok := s.catalog.Lookup(*rt.Topic); ok {
				resp.Topics = append(resp.Topics, pl.topic(&t))
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr(*rt.Topic)
			mt.IsInternal = internalTopic(*rt.Topic)
			mt.ErrorCode = errUnknownTopicOrPartition
			if catalog.ValidateName(*rt.Topic) != nil {
				// A name no topic can have: INVALID_TOPIC_EXCEPTION, as
				// Kafka, so that clients fail instead of waiting for
				// it to appear.
				mt.ErrorCode = errInvalidTopic
			}
			resp.Topics = append(resp.Topics, mt)
		default: // v12+: by topic ID
			if seenID[rt.TopicID] {
				continue
			}
			seenID[rt.TopicID] = true
			if t, ok := s.catalog.LookupID(rt.TopicID); ok && rt.TopicID != ([16]byte{}) {
				resp.Topics = append(resp.Topics, pl.topic(&t))
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = errUnknownTopicID
			resp.Topics = append(resp.Topics, mt)
		}
	}
	return resp
}

// brokersOn returns the brokers as clients of listener see them, leaving
// out those without an endpoint there.
func brokersOn(brokers []Broker, listener string) []Broker {
	out := brokers[:0:0]
	for _, b := range brokers {
		if eb, ok := b.on(listener); ok {
			out = append(out, eb)
		}
	}
	return out
}

// placer decides which brokers Metadata names as a partition's leader and
// replicas.
type placer struct {
	noLeader int16            // a partition's error when there is no leader
	leader   int32            // -1 when there are no brokers
	leaderOf []int32          // [leader], shared
	byRack   map[string]int32 // first broker of each rack
}

func newPlacer(brokers []Broker) *placer {
	p := &placer{noLeader: errLeaderNotAvailable, leader: -1}
	if len(brokers) > 0 {
		p.leader = brokers[0].NodeID
		p.leaderOf = []int32{p.leader}
	}
	for _, b := range brokers {
		if b.Rack == nil {
			continue
		}
		if p.byRack == nil {
			p.byRack = make(map[string]int32)
		}
		if _, ok := p.byRack[*b.Rack]; !ok {
			p.byRack[*b.Rack] = b.NodeID
		}
	}
	return p
}

// clusterMetadataTopic is the name of Kafka's KRaft metadata log: no client
// creates a topic of that name.
const clusterMetadataTopic = "__cluster_metadata"

// internalTopic reports whether Kafka counts name among its internal
// topics (Metadata's is_internal, which clients use to leave them out of
// topic lists): the group and transaction coordinators' logs and the share
// groups' state.
func internalTopic(name string) bool {
	switch name {
	case "__consumer_offsets", "__transaction_state", "__share_group_state":
		return true
	}
	return false
}

func (p *placer) topic(t *catalog.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.IsInternal = internalTopic(t.Name)
	mt.TopicID = t.ID
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, t.Partitions)
	empty := []int32{}
	for i := range mt.Partitions {
		mp := &mt.Partitions[i]
		mp.Default()
		mp.Partition = int32(i)
		mp.LeaderEpoch = 0
		mp.OfflineReplicas = empty
		replicas := p.leaderOf
		if p.byRack != nil && i < len(t.Racks) && len(t.Racks[i]) > 0 {
			replicas = p.replicasInRacks(t.Racks[i])
		}
		if replicas == nil {
			mp.ErrorCode = p.noLeader
			mp.Leader = -1
			mp.Replicas, mp.ISR = empty, empty
			continue
		}
		mp.Leader = replicas[0]
		mp.Replicas, mp.ISR = replicas, replicas
	}
	return mt
}

// replicasInRacks returns one broker per listed rack that has a broker, in
// rack order, or the default leader when none does.
func (p *placer) replicasInRacks(racks []string) []int32 {
	var out []int32
	for _, r := range racks {
		id, ok := p.byRack[r]
		if !ok {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == id
		}
		if !dup {
			out = append(out, id)
		}
	}
	if out == nil {
		return p.leaderOf
	}
	return out
}

// findCoordinator answers FindCoordinator: groups go to the topology; there
// is no transaction or share coordinator.
func (s *Server) findCoordinator(c Client, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	v := req.GetVersion()
	locate := func(key string) (Broker, int16) {
		switch {
		case req.CoordinatorType == coordinatorGroup:
			b, code := s.cfg.Topology.Coordinator(key)
			if code != errNone {
				return b, code
			}
			if eb, ok := b.on(c.Listener); ok {
				return eb, errNone
			}
			return Broker{}, errCoordinatorNotAvailable
		default:
			// Transaction keys: cohort has no transaction coordinator. A
			// retriable answer would have a transactional producer look
			// it up again until its own timeout (a minute for Java's);
			// INVALID_REQUEST fails it at once with the message below, as
			// a transactional Produce is refused. Share keys (v6): Kafka
			// answers INVALID_REQUEST when share groups are off, as they
			// always are here.
			return Broker{}, errInvalidRequest
		}
	}
	message := func(code int16) *string {
		if code == errInvalidRequest && req.CoordinatorType == coordinatorTransaction {
			return kmsg.StringPtr(noTransactions)
		}
		return errorMessage(code)
	}
	if v < 4 {
		b, code := locate(req.CoordinatorKey)
		resp.ErrorCode = code
		if code != errNone {
			resp.NodeID, resp.Host, resp.Port = -1, "", -1
			resp.ErrorMessage = message(code)
		} else {
			resp.NodeID, resp.Host, resp.Port = b.NodeID, b.Host, b.Port
		}
		return resp
	}
	resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, len(req.CoordinatorKeys))
	for i, key := range req.CoordinatorKeys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key = key
		b, code := locate(key)
		rc.ErrorCode = code
		if code != errNone {
			rc.NodeID, rc.Host, rc.Port = -1, "", -1
			rc.ErrorMessage = message(code)
		} else {
			rc.NodeID, rc.Host, rc.Port = b.NodeID, b.Host, b.Port
		}
		resp.Coordinators[i] = rc
	}
	return resp
}

// noTransactions is the message of a FindCoordinator for a transaction key.
const noTransactions = "cohort has no transaction coordinator: transactions are not supported"

// catalogError maps a catalog error to a Kafka error code and message.
func catalogError(err error) (int16, *string) {
	if err == nil {
		return errNone, nil
	}
	msg := kmsg.StringPtr(err.Error())
	switch {
	case errors.Is(err, catalog.ErrInvalidName):
		return errInvalidTopic, msg
	case errors.Is(err, catalog.ErrExists):
		return errTopicAlreadyExists, msg
	case errors.Is(err, catalog.ErrNotFound):
		return errUnknownTopicOrPartition, msg
	case errors.Is(err, catalog.ErrInvalidPartitions):
		return errInvalidPartitions, msg
	case errors.Is(err, catalog.ErrInvalidRacks):
		return errInvalidReplicaAssign, msg
	case errors.Is(err, catalog.ErrUnavailable):
		// Retriable; admin clients forget the controller, read Metadata
		// again and go to the one it names (another node).
		return errNotController, msg
	case errors.Is(err, catalog.ErrPersist):
		return errKafkaStorageError, msg
	case errors.Is(err, catalog.ErrLimit):
		return errPolicyViolation, msg
	default:
		return errUnknownServerError, msg
	}
}

// duplicates returns the names among name(0..n-1) that occur more than
// once: the topics a CreateTopics or CreatePartitions request names twice
// (answered INVALID_REQUEST with namedTwice).
func duplicates(n int, name func(int) string) map[string]bool {
	seen := map[string]bool{}
	dups := map[string]bool{}
	for i := 0; i < n; i++ {
		if nm := name(i); seen[nm] {
			dups[nm] = true
		} else {
			seen[nm] = true
		}
	}
	return dups
}

const namedTwice = "the request names this topic more than once"

// replicaRacks is racksOf with the brokers' racks looked up once per
// request, on first use (*rackOf).
func (s *Server) replicaRacks(rackOf *map[int32]string, replicas [][]int32) [][]string {
	if *rackOf == nil {
		*rackOf = s.brokerRacks()
	}
	return racksOf(*rackOf, replicas)
}

// racksOf maps replica broker ids to the racks of those brokers (nil when
// none of them has a rack), so that an explicit replica assignment keeps the
// placement information cohort can use: rack-aware consumer assignors.
func racksOf(rackOf map[int32]string, replicas [][]int32) [][]string {
	var out [][]string
	found := false
	for _, rs := range replicas {
		var racks []string
		for _, id := range rs {
			if r, ok := rackOf[id]; ok {
				racks = append(racks, r)
				found = true
			}
		}
		out = append(out, racks)
	}
	if !found {
		return nil
	}
	return out
}

func (s *Server) brokerRacks() map[int32]string {
	m := map[int32]string{}
	for _, b := range s.cfg.Topology.Brokers() {
		if b.Rack != nil && *b.Rack != "" {
			m[b.NodeID] = *b.Rack
		}
	}
	return m
}

// createTopics answers CreateTopics from the catalog. The replication
// factor is accepted and ignored (cohort stores no records); an explicit
// replica assignment only sets the partition count and, through the brokers'
// racks, the partitions' racks.
func (s *Server) createTopics(req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	dups := duplicates(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	var rackOf map[int32]string
	// The topics that pass the request's checks are created together
	// (catalog.CreateMany: one copy of the catalog's indexes per
	// thousand topics, not per topic), in the request's order.
	var create []catalog.NewTopic
	var at []int // create[i] answers resp.Topics[at[i]]
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		code, msg, n, racks := s.createTopic(req, t, dups, &rackOf)
		rt.ErrorCode, rt.ErrorMessage = code, msg
		if code == errNone {
			rt.NumPartitions = n
			create = append(create, catalog.NewTopic{Name: t.Topic, Partitions: n, Racks: racks})
			at = append(at, len(resp.Topics))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// A validation checks the topics together, as the creation would (the
	// partition bound counts the ones before each), so it passes exactly
	// where the same request would create.
	apply := s.catalog.CreateMany
	if req.ValidateOnly {
		apply = s.catalog.ValidateMany
	}
	for i, err := range apply(create) {
		rt := &resp.Topics[at[i]]
		if rt.ErrorCode, rt.ErrorMessage = catalogError(err); err != nil {
			rt.NumPartitions = -1
		}
	}
	for i := range resp.Topics {
		if rt := &resp.Topics[i]; rt.ErrorCode == errNone {
			rt.TopicID, rt.ReplicationFactor = catalog.TopicID(rt.Topic), 1
			// v5+: the topic's configs, never null once it is created (Java's
			// admin client reads the list unchecked): cohort keeps none.
			rt.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
		}
	}
	return resp
}

// createTopic checks one topic of a CreateTopics against the request's
// rules and the catalog: an error code and message, or errNone with the
// partition count and racks to create it with.
func (s *Server) createTopic(req *kmsg.CreateTopicsRequest, t kmsg.CreateTopicsRequestTopic, dups map[string]bool, rackOf *map[int32]string) (int16, *string, int32, [][]string) {
	fail := func(code int16, msg string) (int16, *string, int32, [][]string) {
		return code, kmsg.StringPtr(msg), 0, nil
	}
	if dups[t.Topic] {
		return fail(errInvalidRequest, namedTwice)
	}
	if t.Topic == clusterMetadataTopic { // Kafka's KRaft log, never a topic a client creates
		return fail(errInvalidRequest, "Creation of internal topic __cluster_metadata is prohibited.")
	}
	// The name (and whether it is taken) first, then the partitions and
	// replicas, in Kafka's order.
	if err := s.catalog.ValidateCreate(t.Topic, 1, nil); err != nil && !errors.Is(err, catalog.ErrLimit) {
		code, msg := catalogError(err)
		return code, msg, 0, nil
	}
	n := t.NumPartitions
	var racks [][]string
	if len(t.ReplicaAssignment) > 0 {
		if t.ReplicationFactor != -1 {
			return fail(errInvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		}
		if n != -1 {
			return fail(errInvalidRequest, "both NumPartitions and ReplicaAssignment are set")
		}
		byPart := make([][]int32, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(byPart) || byPart[a.Partition] != nil {
				return fail(errInvalidReplicaAssign, "the replica assignment must list partitions 0..n-1 once each")
			}
			if msg := s.badReplicas(a.Replicas); msg != "" {
				return fail(errInvalidReplicaAssign, msg)
			}
			byPart[a.Partition] = append([]int32{}, a.Replicas...)
		}
		if len(byPart) > catalog.MaxPartitions {
			code, msg := catalogError(fmt.Errorf("%w: %d partitions, the maximum is %d", catalog.ErrInvalidPartitions, len(byPart), catalog.MaxPartitions))
			return code, msg, 0, nil
		}
		n = int32(len(byPart))
		racks = s.replicaRacks(rackOf, byPart)
	} else {
		// The replication factor is accepted and ignored otherwise
		// (cohort stores no records), but it must be one.
		if rf := t.ReplicationFactor; rf == 0 || rf < -1 {
			return fail(errInvalidReplicationFact, "Replication factor must be larger than 0, or -1 to use the default value.")
		}
		if n == -1 {
			n = defaultPartitions
		}
	}
	return errNone, nil, n, racks
}

// badReplicas says what is wrong with a partition's replica list in a manual
// assignment, as Kafka's controller does ("" if nothing): empty, a broker
// twice, or a broker that is not in the topology. Lists of different sizes
// are accepted (Kafka refuses them): a partition's replicas only give it its
// racks in cohort, which stores no records.
func (s *Server) badReplicas(replicas []int32) string {
	if len(replicas) == 0 {
		return "The manual partition assignment includes an empty replica list."
	}
	seen := make(map[int32]bool, len(replicas))
	for _, b := range replicas {
		if seen[b] {
			return fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", b)
		}
		seen[b] = true
		if !slices.ContainsFunc(s.cfg.Topology.Brokers(), func(x Broker) bool { return x.NodeID == b }) {
			return fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", b)
		}
	}
	return ""
}

// deleteTarget is one entry of a DeleteTopics request: a name (v0-5), or a
// name or an ID (v6+).
type deleteTarget struct {
	name *string
	id   [16]byte
}

// deleteTargets lists req's entries, in order.
func deleteTargets(req *kmsg.DeleteTopicsRequest) []deleteTarget {
	var targets []deleteTarget
	if req.GetVersion() < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, deleteTarget{name: kmsg.StringPtr(n)})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, deleteTarget{name: t.Topic, id: t.TopicID})
		}
	}
	return targets
}

// deleteShapeRefusals returns, for each target, why it is INVALID_REQUEST
// whatever it names ("" when it is not): as Kafka, before anything is
// authorized or deleted, an entry naming both a name and an ID, or neither,
// and every entry of a name or ID given twice.
func deleteShapeRefusals(version int16, targets []deleteTarget) []string {
	var zero [16]byte
	dupName := duplicates(len(targets), func(i int) string {
		if targets[i].name == nil || targets[i].id != zero {
			return "\x00" + strconv.Itoa(i) // not a by-name entry: never a duplicate
		}
		return *targets[i].name
	})
	dupID := duplicates(len(targets), func(i int) string {
		if targets[i].name != nil || targets[i].id == zero {
			return "\x00" + strconv.Itoa(i)
		}
		return string(targets[i].id[:])
	})
	out := make([]string, len(targets))
	for i, tg := range targets {
		switch {
		case tg.name != nil && tg.id != zero:
			out[i] = "You may not specify both topic name and topic id."
		case tg.name == nil && tg.id == zero && version >= 6:
			out[i] = "Neither topic name nor id were specified."
		case tg.name != nil && dupName[*tg.name]:
			out[i] = "Duplicate topic name."
		case tg.name == nil && dupID[string(tg.id[:])]:
			out[i] = "Duplicate topic id."
		}
	}
	return out
}

// deleteTopics answers DeleteTopics, by name (v0-5) or by name or ID (v6+).
func (s *Server) deleteTopics(req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := deleteTargets(req)
	shape := deleteShapeRefusals(req.GetVersion(), targets)
	// A name whose topic another entry gives by ID: Kafka refuses it and
	// deletes neither (cohort answers both entries so, in order). Only
	// entries the principal may delete reach here, so this reveals no ID.
	byID := map[[16]byte]int{}
	for i, tg := range targets {
		if shape[i] == "" && tg.name == nil {
			byID[tg.id] = i
		}
	}
	for i, tg := range targets {
		if shape[i] != "" || tg.name == nil || len(byID) == 0 {
			continue
		}
		if t, ok := s.catalog.Lookup(*tg.name); ok {
			if j, dup := byID[t.ID]; dup {
				const alias = "The provided topic name maps to an ID that was already supplied."
				shape[i], shape[j] = alias, alias
			}
		}
	}
	for i, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = tg.name, tg.id
		if refusal := shape[i]; refusal != "" {
			rt.ErrorCode, rt.ErrorMessage = errInvalidRequest, kmsg.StringPtr(refusal)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		var name string
		switch {
		case tg.name != nil:
			name = *tg.name
		default:
			t, ok := s.catalog.LookupID(tg.id)
			if !ok || tg.id == ([16]byte{}) {
				rt.ErrorCode, rt.ErrorMessage = errUnknownTopicID, errorMessage(errUnknownTopicID)
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			name = t.Name
			rt.Topic = kmsg.StringPtr(name)
		}
		if t, ok := s.catalog.Lookup(name); ok {
			rt.TopicID = t.ID
		}
		err := s.catalog.Delete(name)
		rt.ErrorCode, rt.ErrorMessage = catalogError(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// createPartitions answers CreatePartitions: partition counts only grow.
func (s *Server) createPartitions(req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	dups := duplicates(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	var rackOf map[int32]string
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		if dups[t.Topic] {
			rt.ErrorCode, rt.ErrorMessage = errInvalidRequest, kmsg.StringPtr(namedTwice)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		var racks [][]string
		if t.Assignment != nil { // a non-null list, even empty, is an assignment (Kafka)
			// The topic and the new count first, then the assignment, in
			// Kafka's order.
			if err := s.catalog.ValidateAddPartitions(t.Topic, t.Count, nil); err != nil {
				rt.ErrorCode, rt.ErrorMessage = catalogError(err)
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			if cur, ok := s.catalog.Lookup(t.Topic); ok && t.Count > cur.Partitions && int64(len(t.Assignment)) != int64(t.Count)-int64(cur.Partitions) {
				rt.ErrorCode = errInvalidReplicaAssign
				rt.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("increasing the partition count from %d to %d needs %d assignments, the request has %d",
					cur.Partitions, t.Count, int64(t.Count)-int64(cur.Partitions), len(t.Assignment)))
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			bad := ""
			for _, a := range t.Assignment {
				if bad = s.badReplicas(a.Replicas); bad != "" {
					break
				}
			}
			if bad != "" {
				rt.ErrorCode, rt.ErrorMessage = errInvalidReplicaAssign, kmsg.StringPtr(bad)
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			reps := make([][]int32, len(t.Assignment))
			for i, a := range t.Assignment {
				reps[i] = a.Replicas
			}
			racks = s.replicaRacks(&rackOf, reps)
		}
		var err error
		if req.ValidateOnly {
			err = s.catalog.ValidateAddPartitions(t.Topic, t.Count, racks)
		} else {
			_, err = s.catalog.AddPartitions(t.Topic, t.Count, racks)
		}
		rt.ErrorCode, rt.ErrorMessage = catalogError(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
