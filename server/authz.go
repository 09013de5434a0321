package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/acl"
)

// Kafka's authorization error codes.
const (
	codeTopicAuthz   int16 = 29 // TOPIC_AUTHORIZATION_FAILED
	codeGroupAuthz   int16 = 30 // GROUP_AUTHORIZATION_FAILED
	codeClusterAuthz int16 = 31 // CLUSTER_AUTHORIZATION_FAILED
	codeTxnIDAuthz   int16 = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
)

// opsOmitted is the AuthorizedOperations of a response that was not asked
// for them (Kafka's INT32_MIN).
const opsOmitted int32 = -2147483648

// handleAuthorized answers r after checking the principal's permissions
// with Kafka's rules (KafkaApis and, for the topic admin APIs, KRaft's
// ControllerApis); docs/security.md has the table of checks.
//
// Where Kafka refuses part of a request (some topics, some groups), the
// refused parts are answered here and never reach the coordinator or the
// catalog; the rest is forwarded, as a copy of the request holding only
// the allowed parts, and the answers are merged back in the request's
// order. (Kafka lists the refused parts first or last depending on the API;
// clients match entries by name, so cohort keeps one order for all.) When
// everything is allowed the request is forwarded as it is: the hot
// requests (Heartbeat, OffsetCommit) cost one Authorize call per group and
// per topic and no allocation.
//
// An API without a rule here is refused by closing the connection, so
// that a newly advertised API cannot slip through unchecked.
func (s *Server) handleAuthorized(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	switch r.key {
	case keyApiVersions, keySaslHandshake, keySaslAuthenticate:
		// No check, as in Kafka.
	case keyDescribeACLs, keyCreateACLs, keyDeleteACLs, keyDescribeSCRAM, keyAlterSCRAM:
		// Checked by their own handlers (CLUSTER DESCRIBE / ALTER).
	case keyJoinGroup:
		req := r.req.(*kmsg.JoinGroupRequest)
		if !s.authorize(c, r.key, acl.OpRead, acl.ResourceGroup, req.Group) {
			resp := group.ErrorResponse(req, codeGroupAuthz).(*kmsg.JoinGroupResponse)
			resp.MemberID = "" // Kafka's error response names no member
			return resp, nil
		}
	case keySyncGroup:
		req := r.req.(*kmsg.SyncGroupRequest)
		if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
			// Kafka rejects this before it authorizes.
			return group.ErrorResponse(req, group.ErrInconsistentProtocol), nil
		}
		if !s.authorize(c, r.key, acl.OpRead, acl.ResourceGroup, req.Group) {
			return group.ErrorResponse(req, codeGroupAuthz), nil
		}
	case keyHeartbeat:
		if req := r.req.(*kmsg.HeartbeatRequest); !s.authorize(c, r.key, acl.OpRead, acl.ResourceGroup, req.Group) {
			return group.ErrorResponse(req, codeGroupAuthz), nil
		}
	case keyLeaveGroup:
		if req := r.req.(*kmsg.LeaveGroupRequest); !s.authorize(c, r.key, acl.OpRead, acl.ResourceGroup, req.Group) {
			return group.ErrorResponse(req, codeGroupAuthz), nil
		}
	case keyConsumerGroupHeartbeat:
		// GROUP READ, then TOPIC DESCRIBE on every topic subscribed by
		// name, as Kafka checks them.
		req := r.req.(*kmsg.ConsumerGroupHeartbeatRequest)
		if !s.authorize(c, r.key, acl.OpRead, acl.ResourceGroup, req.Group) {
			return group.ErrorResponse(req, codeGroupAuthz), nil
		}
		for _, t := range req.SubscribedTopicNames {
			if !s.authorize(c, r.key, acl.OpDescribe, acl.ResourceTopic, t) {
				return group.ErrorResponse(req, codeTopicAuthz), nil
			}
		}
	case keyConsumerGroupDescribe:
		return s.authzConsumerGroupDescribe(ctx, c, r)
	case keyOffsetCommit:
		return s.authzOffsetCommit(ctx, c, r)
	case keyFetch:
		return s.authzFetch(c, r), nil
	case keyListOffsets:
		return s.authzListOffsets(c, r), nil
	case keyOffsetForLeaderEpoch:
		return s.authzOffsetForLeaderEpoch(c, r), nil
	case keyProduce:
		return s.authzProduce(c, r), nil
	case keyOffsetFetch:
		if r.version >= 8 {
			return s.authzOffsetFetchGroups(ctx, c, r)
		}
		return s.authzOffsetFetch(ctx, c, r)
	case keyDescribeGroups:
		return s.authzDescribeGroups(ctx, c, r)
	case keyListGroups:
		return s.authzListGroups(ctx, c, r)
	case keyDeleteGroups:
		return s.authzDeleteGroups(ctx, c, r)
	case keyOffsetDelete:
		return s.authzOffsetDelete(ctx, c, r)
	case keyFindCoordinator:
		return s.authzFindCoordinator(ctx, c, r)
	case keyMetadata:
		return s.authzMetadata(ctx, c, r)
	case keyDescribeCluster:
		return s.authzDescribeCluster(ctx, c, r)
	case keyCreateTopics:
		return s.authzCreateTopics(ctx, c, r)
	case keyDeleteTopics:
		return s.authzDeleteTopics(ctx, c, r)
	case keyCreatePartitions:
		return s.authzCreatePartitions(ctx, c, r)
	case keyDescribeConfigs:
		return s.authzDescribeConfigs(ctx, c, r), nil
	case keyAlterConfigs, keyIncrementalAlterConfigs:
		return s.authzAlterConfigs(ctx, c, r), nil
	case keyListConfigResources:
		return s.authzListConfigResources(c, r), nil
	case keyDescribeClientQuotas:
		return s.authzDescribeClientQuotas(c, r), nil
	default:
		return nil, fmt.Errorf("no authorization rule for API key %d", r.key)
	}
	return s.handleUnchecked(ctx, c, r)
}

// allowed reports whether c may perform op on the resource, silently.
// Used where Kafka filters without logging (listing every group or topic)
// or where a refusal is decided by several checks.
func (s *Server) allowed(c Client, op acl.Operation, rt acl.ResourceType, name string) bool {
	return s.authz.Authorize(c.Principal, c.Host, op, rt, name)
}

// authorize is allowed, with a refusal logged and counted (refuse).
func (s *Server) authorize(c Client, key int16, op acl.Operation, rt acl.ResourceType, name string) bool {
	if s.allowed(c, op, rt, name) {
		return true
	}
	s.refuse(c, key, op, rt, name)
	return false
}

// refuse records one refused request or part of a request (a topic, a
// group): the denial counter of API key, and one debug line. Debug, not
// info: a client without permission retries, and would flood the log.
func (s *Server) refuse(c Client, key int16, op acl.Operation, rt acl.ResourceType, name string) {
	s.countDenied(key)
	ctx := context.Background()
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	api := fmt.Sprint(key)
	if a := lookupAPI(key); a != nil {
		api = a.Name
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "authorization denied",
		slog.String("principal", c.Principal), slog.String("host", c.Host), slog.String("api", api),
		slog.String("operation", op.String()), slog.String("resource_type", rt.String()), slog.String("resource", name))
}

// denials authorizes op on n resources of type rt, the i-th called
// name(i), and returns which were refused: nil when none was (the common
// case, without allocation).
func (s *Server) denials(c Client, key int16, op acl.Operation, rt acl.ResourceType, n int, name func(int) string) []bool {
	var denied []bool
	for i := 0; i < n; i++ {
		if s.authorize(c, key, op, rt, name(i)) {
			continue
		}
		if denied == nil {
			denied = make([]bool, n)
		}
		denied[i] = true
	}
	return denied
}

// forward answers sub, a copy of r's request holding only its allowed
// parts, without checks.
func (s *Server) forward(ctx context.Context, c Client, r *request, sub kmsg.Request) (kmsg.Response, error) {
	return s.handleUnchecked(ctx, c, &request{key: r.key, version: r.version, corr: r.corr, clientID: r.clientID, req: sub})
}

// forwardSome is forward, unless nothing is left of the request (empty):
// then the coordinator is not asked and the answer starts empty.
func (s *Server) forwardSome(ctx context.Context, c Client, r *request, sub kmsg.Request, empty bool) (kmsg.Response, error) {
	if empty {
		return r.req.ResponseKind(), nil
	}
	return s.forward(ctx, c, r, sub)
}

// kept returns the items not denied, as a new non-nil slice (an empty
// OffsetFetch topic list must not turn into a null one, "all topics").
func kept[T any](items []T, denied []bool) []T {
	out := make([]T, 0, len(items))
	for i, it := range items {
		if !denied[i] {
			out = append(out, it)
		}
	}
	return out
}

// merged returns the answers to items in request order: deny(item) for a
// denied item, and for an allowed one its answer in got (answerFor). Each
// answer is used once: an item repeated in the request whose one answer
// went to an earlier copy is left out (a coordinator answers a repeated
// topic once, with the partitions of every copy).
func merged[I, O any](items []I, denied []bool, got []O, same func(*I, *O) bool, deny func(*I) O) []O {
	out := make([]O, 0, len(items))
	next := 0
	var used []bool // answers taken, once one was taken out of order; before that, got[:next]
	for i := range items {
		it := &items[i]
		if denied[i] {
			out = append(out, deny(it))
			continue
		}
		j := answerFor(it, got, next, same)
		if j < 0 {
			continue
		}
		if used == nil && j != next {
			used = make([]bool, len(got))
			for k := range next {
				used[k] = true
			}
		}
		if used != nil {
			if used[j] {
				continue
			}
			used[j] = true
		}
		out = append(out, got[j])
		next = j + 1
	}
	return out
}

// answerFor returns the index of it's answer in got, -1 if none. got
// answers the forwarded items in order, so the answer at next is tried
// first; an item without an answer (a coordinator answers a repeated
// topic once) is left out by the callers.
func answerFor[I, O any](it *I, got []O, next int, same func(*I, *O) bool) int {
	if next < len(got) && same(it, &got[next]) {
		return next
	}
	for k := range got {
		if same(it, &got[k]) {
			return k
		}
	}
	return -1
}

// keepIf returns the items ok accepts. It copies only once an item is
// rejected, so that an answer the coordinator may share is never changed
// in place.
func keepIf[T any](items []T, ok func(*T) bool) []T {
	for i := range items {
		if ok(&items[i]) {
			continue
		}
		out := make([]T, i, len(items))
		copy(out, items[:i])
		for j := i + 1; j < len(items); j++ {
			if ok(&items[j]) {
				out = append(out, items[j])
			}
		}
		return out
	}
	return items
}

// inOrder is merged's same for answers the server produces itself, one
// per request item in order.
func inOrder[I, O any](*I, *O) bool { return true }

// authzOffsetCommit: GROUP READ, then TOPIC READ per topic. Refused topics
// are answered TOPIC_AUTHORIZATION_FAILED on every partition and not
// committed; if no topic is left the coordinator is not called (Kafka).
func (s *Server) authzOffsetCommit(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetCommitRequest)
	if !s.authorize(c, r.key, acl.OpRead, acl.ResourceGroup, req.Group) {
		return group.ErrorResponse(req, codeGroupAuthz), nil
	}
	denied := s.denials(c, r.key, acl.OpRead, acl.ResourceTopic, len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	if denied == nil {
		return s.handleUnchecked(ctx, c, r)
	}
	sub := *req
	sub.Topics = kept(req.Topics, denied)
	got, err := s.forwardSome(ctx, c, r, &sub, len(sub.Topics) == 0)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.OffsetCommitResponse)
	resp.Topics = merged(req.Topics, denied, resp.Topics,
		func(t *kmsg.OffsetCommitRequestTopic, a *kmsg.OffsetCommitResponseTopic) bool {
			return t.Topic == a.Topic
		},
		func(t *kmsg.OffsetCommitRequestTopic) kmsg.OffsetCommitResponseTopic {
			return commitRefused(t, codeTopicAuthz)
		})
	return resp, nil
}

// commitRefused answers an OffsetCommit topic the coordinator is not asked
// about: code on each of its partitions.
func commitRefused(t *kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	a := kmsg.NewOffsetCommitResponseTopic()
	a.Topic = t.Topic
	a.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
	for i, p := range t.Partitions {
		a.Partitions[i] = kmsg.NewOffsetCommitResponseTopicPartition()
		a.Partitions[i].Partition, a.Partitions[i].ErrorCode = p.Partition, code
	}
	return a
}

// noMetadata is the metadata of an offset that is not revealed.
var noMetadata = ""

// authzOffsetFetch serves OffsetFetch v0-7 (one group): GROUP DESCRIBE
// (GROUP_AUTHORIZATION_FAILED, at the top level from v2, on each requested
// partition before), then TOPIC DESCRIBE per listed topic (refused ones
// answered TOPIC_AUTHORIZATION_FAILED, offset -1, not asked of the
// coordinator); a request for all topics has the unauthorized topics
// removed from the answer. As in Kafka the coordinator is asked even when
// no listed topic is left, so that group-level errors still show, and a
// group-level error is returned as the coordinator gave it.
func (s *Server) authzOffsetFetch(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetFetchRequest)
	if !s.authorize(c, r.key, acl.OpDescribe, acl.ResourceGroup, req.Group) {
		return group.ErrorResponse(req, codeGroupAuthz), nil
	}
	if req.Topics == nil && req.Version >= 2 { // all topics
		got, err := s.handleUnchecked(ctx, c, r)
		if err != nil {
			return nil, err
		}
		resp := got.(*kmsg.OffsetFetchResponse)
		resp.Topics = describableOnly(s, c, r.key, resp.Topics, func(t *kmsg.OffsetFetchResponseTopic) string { return t.Topic })
		return resp, nil
	}
	denied := s.denials(c, r.key, acl.OpDescribe, acl.ResourceTopic, len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	if denied == nil {
		return s.handleUnchecked(ctx, c, r)
	}
	sub := *req
	sub.Topics = kept(req.Topics, denied)
	got, err := s.forward(ctx, c, r, &sub)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.OffsetFetchResponse)
	if req.Version >= 2 && resp.ErrorCode != errNone {
		return resp, nil
	}
	resp.Topics = merged(req.Topics, denied, resp.Topics,
		func(t *kmsg.OffsetFetchRequestTopic, a *kmsg.OffsetFetchResponseTopic) bool {
			return t.Topic == a.Topic
		},
		func(t *kmsg.OffsetFetchRequestTopic) kmsg.OffsetFetchResponseTopic {
			a := kmsg.NewOffsetFetchResponseTopic()
			a.Topic = t.Topic
			a.Partitions = make([]kmsg.OffsetFetchResponseTopicPartition, len(t.Partitions))
			for i, p := range t.Partitions {
				ap := kmsg.NewOffsetFetchResponseTopicPartition()
				ap.Partition, ap.Offset, ap.Metadata, ap.ErrorCode = p, -1, &noMetadata, codeTopicAuthz
				a.Partitions[i] = ap
			}
			return a
		})
	return resp, nil
}

// fetchRefused answers a listed OffsetFetch (v8+) topic the coordinator
// is not asked about: code on each of its partitions, offset -1, no
// metadata.
func fetchRefused(t *kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroupTopic {
	at := kmsg.NewOffsetFetchResponseGroupTopic()
	at.Topic = t.Topic
	at.Partitions = make([]kmsg.OffsetFetchResponseGroupTopicPartition, len(t.Partitions))
	for k, p := range t.Partitions {
		ap := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		ap.Partition, ap.Offset, ap.Metadata, ap.ErrorCode = p, -1, &noMetadata, code
		at.Partitions[k] = ap
	}
	return at
}

// describableOnly removes the topics c may not DESCRIBE from an answer
// about all of a group's topics. Kafka logs these refusals.
func describableOnly[T any](s *Server, c Client, key int16, topics []T, name func(*T) string) []T {
	return keepIf(topics, func(t *T) bool { return s.authorize(c, key, acl.OpDescribe, acl.ResourceTopic, name(t)) })
}

// authzOffsetFetchGroups serves OffsetFetch v8+: each group is checked as
// authzOffsetFetch checks the one group of older versions, with
// GROUP_AUTHORIZATION_FAILED in the group's own error code. Refused groups
// are not asked of the coordinator; nothing about them is answered but the
// error.
func (s *Server) authzOffsetFetchGroups(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetFetchRequest)
	groupDenied := s.denials(c, r.key, acl.OpDescribe, acl.ResourceGroup, len(req.Groups), func(i int) string { return req.Groups[i].Group })
	if groupDenied == nil {
		groupDenied = make([]bool, len(req.Groups))
	}
	topicDenied := make([][]bool, len(req.Groups)) // nil: no listed topic refused
	changed := false
	sub := *req
	sub.Groups = make([]kmsg.OffsetFetchRequestGroup, 0, len(req.Groups))
	for i, g := range req.Groups {
		if groupDenied[i] {
			changed = true
			continue
		}
		if g.Topics != nil {
			topicDenied[i] = s.denials(c, r.key, acl.OpDescribe, acl.ResourceTopic, len(g.Topics), func(j int) string { return g.Topics[j].Topic })
			if topicDenied[i] != nil {
				g.Topics = kept(g.Topics, topicDenied[i])
				changed = true
			}
		}
		sub.Groups = append(sub.Groups, g)
	}
	fwd := kmsg.Request(req)
	if changed {
		fwd = &sub
	}
	got, err := s.forwardSome(ctx, c, r, fwd, len(sub.Groups) == 0)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.OffsetFetchResponse)
	sameGroup := func(g *kmsg.OffsetFetchRequestGroup, a *kmsg.OffsetFetchResponseGroup) bool {
		return g.Group == a.Group
	}
	sameTopic := func(t *kmsg.OffsetFetchRequestGroupTopic, a *kmsg.OffsetFetchResponseGroupTopic) bool {
		return t.Topic == a.Topic
	}
	out := make([]kmsg.OffsetFetchResponseGroup, 0, len(req.Groups))
	next := 0
	for i := range req.Groups {
		g := &req.Groups[i]
		if groupDenied[i] {
			a := kmsg.NewOffsetFetchResponseGroup()
			a.Group, a.ErrorCode = g.Group, codeGroupAuthz
			out = append(out, a)
			continue
		}
		j := answerFor(g, resp.Groups, next, sameGroup)
		if j < 0 {
			continue
		}
		next = j + 1
		a := resp.Groups[j]
		switch {
		case a.ErrorCode != errNone:
		case g.Topics == nil:
			a.Topics = describableOnly(s, c, r.key, a.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) string { return t.Topic })
		case topicDenied[i] != nil:
			a.Topics = merged(g.Topics, topicDenied[i], a.Topics, sameTopic, func(t *kmsg.OffsetFetchRequestGroupTopic) kmsg.OffsetFetchResponseGroupTopic {
				return fetchRefused(t, codeTopicAuthz)
			})
		}
		out = append(out, a)
	}
	resp.Groups = out
	return resp, nil
}

// authzDescribeGroups: GROUP DESCRIBE per group. A refused group is
// answered GROUP_AUTHORIZATION_FAILED with nothing else (Kafka's
// groupError: empty state, protocol and members). With
// IncludeAuthorizedOperations (v3+) each described group carries the
// principal's operations on it.
func (s *Server) authzDescribeGroups(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.DescribeGroupsRequest)
	resp, err := s.authzDescribeGroupsOnly(ctx, c, r, req)
	if err != nil {
		return nil, err
	}
	if _, asked := group.HistoryRequested(req); asked {
		s.withholdConsumerHistory(c, r.key, resp.(*kmsg.DescribeGroupsResponse).Groups)
	}
	return resp, nil
}

// withholdConsumerHistory drops the rebalance history (group.HistoryTag)
// of every group whose consumer-protocol history names a topic the
// principal may not describe. ConsumerGroupDescribe withholds such a group
// whole, as Kafka does, and the history would tell the same facts
// (members' assignments, changed topics). A classic group's history stays:
// Kafka's DescribeGroups gives its members' subscriptions and assignments to
// anyone allowed to describe the group.
func (s *Server) withholdConsumerHistory(c Client, key int16, gs []kmsg.DescribeGroupsResponseGroup) {
	refused := s.describeRefused(c, key)
	for i := range gs {
		if doc, ok := group.HistoryTagOf(&gs[i]); ok && doc.NamesConsumerTopic(refused) {
			group.WithholdHistory(&gs[i], doc)
		}
	}
}

// describeRefused reports whether the principal of c may not DESCRIBE a
// topic, each topic checked (and a refusal counted) once.
func (s *Server) describeRefused(c Client, key int16) func(topic string) bool {
	gate := s.topicAuthzGate(c, key, acl.OpDescribe)
	seen := map[string]bool{}
	return func(topic string) bool {
		no, ok := seen[topic]
		if !ok {
			no = gate(topic, false) != errNone
			seen[topic] = no
		}
		return no
	}
}

// authzDescribeGroupsOnly is authzDescribeGroups' GROUP DESCRIBE part.
func (s *Server) authzDescribeGroupsOnly(ctx context.Context, c Client, r *request, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	return describeAuthorized(s, ctx, c, r, req.Groups, req.Version >= 3 && req.IncludeAuthorizedOperations,
		func(groups []string) kmsg.Request { sub := *req; sub.Groups = groups; return &sub },
		func(resp kmsg.Response) *[]kmsg.DescribeGroupsResponseGroup {
			return &resp.(*kmsg.DescribeGroupsResponse).Groups
		},
		func(g *kmsg.DescribeGroupsResponseGroup) (string, int16, *int32) {
			return g.Group, g.ErrorCode, &g.AuthorizedOperations
		},
		func(id string) kmsg.DescribeGroupsResponseGroup {
			a := kmsg.NewDescribeGroupsResponseGroup()
			a.Group, a.ErrorCode = id, codeGroupAuthz
			return a
		})
}

// authzConsumerGroupDescribe: GROUP DESCRIBE per group, as DescribeGroups,
// and TOPIC DESCRIBE on every topic a member is assigned or targeted: a group
// naming a topic the principal may not describe is answered
// TOPIC_AUTHORIZATION_FAILED alone, without its members, as Kafka does (the
// assignment would reveal the topic).
func (s *Server) authzConsumerGroupDescribe(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.ConsumerGroupDescribeRequest)
	resp, err := s.authzConsumerGroupDescribeGroups(ctx, c, r, req)
	if err != nil {
		return nil, err
	}
	refused := s.describeRefused(c, r.key)
	gs := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups
	for i := range gs {
		g := &gs[i]
		if g.ErrorCode != errNone || !namesRefusedTopic(g, refused) {
			continue
		}
		hidden := kmsg.NewConsumerGroupDescribeResponseGroup()
		hidden.Group, hidden.ErrorCode = g.Group, codeTopicAuthz
		hidden.ErrorMessage = kmsg.StringPtr("The group has described topic(s) that the client is not authorized to describe.")
		// The rest keeps the defaults, AuthorizedOperations' "omitted"
		// too, as Kafka's answer for a group in error.
		*g = hidden
	}
	return resp, nil
}

// namesRefusedTopic reports whether a member of g is assigned, targeted, or
// still revoking (group.RevokingTag) a topic refused reports.
func namesRefusedTopic(g *kmsg.ConsumerGroupDescribeResponseGroup, refused func(string) bool) bool {
	for i := range g.Members {
		m := &g.Members[i]
		for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if refused(tp.Topic) {
					return true
				}
			}
		}
		revoking, _ := group.RevokingOf(m)
		for _, tp := range revoking {
			if refused(tp.Topic) {
				return true
			}
		}
	}
	return false
}

// authzConsumerGroupDescribeGroups is authzConsumerGroupDescribe's GROUP
// DESCRIBE part.
func (s *Server) authzConsumerGroupDescribeGroups(ctx context.Context, c Client, r *request, req *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, error) {
	return describeAuthorized(s, ctx, c, r, req.Groups, req.IncludeAuthorizedOperations,
		func(groups []string) kmsg.Request { sub := *req; sub.Groups = groups; return &sub },
		func(resp kmsg.Response) *[]kmsg.ConsumerGroupDescribeResponseGroup {
			return &resp.(*kmsg.ConsumerGroupDescribeResponse).Groups
		},
		func(g *kmsg.ConsumerGroupDescribeResponseGroup) (string, int16, *int32) {
			return g.Group, g.ErrorCode, &g.AuthorizedOperations
		},
		func(id string) kmsg.ConsumerGroupDescribeResponseGroup {
			a := kmsg.NewConsumerGroupDescribeResponseGroup()
			a.Group, a.ErrorCode = id, codeGroupAuthz
			return a
		})
}

// describeAuthorized serves a request describing groups (DescribeGroups,
// ConsumerGroupDescribe) under GROUP DESCRIBE: the groups the principal may
// describe are forwarded (sub builds that request), the others answered
// GROUP_AUTHORIZATION_FAILED alone (denied), in request order; with
// includeOps each described group carries the principal's operations on it.
// groupsOf gives the answer's groups, fields a group's id, error and
// operations.
func describeAuthorized[G any](s *Server, ctx context.Context, c Client, r *request, groups []string, includeOps bool,
	sub func([]string) kmsg.Request, groupsOf func(kmsg.Response) *[]G, fields func(*G) (string, int16, *int32),
	denied func(string) G) (kmsg.Response, error) {
	refused := s.denials(c, r.key, acl.OpDescribe, acl.ResourceGroup, len(groups), func(i int) string { return groups[i] })
	ask := groups
	if refused != nil {
		ask = kept(groups, refused)
	}
	resp, err := s.forwardSome(ctx, c, r, sub(ask), len(ask) == 0)
	if err != nil {
		return nil, err
	}
	gs := groupsOf(resp)
	if includeOps {
		for i := range *gs {
			id, code, ops := fields(&(*gs)[i])
			*ops = opsOmitted
			if code == errNone {
				*ops = s.authz.AuthorizedOperations(c.Principal, c.Host, acl.ResourceGroup, id)
			}
		}
	}
	if refused != nil {
		*gs = merged(groups, refused, *gs,
			func(id *string, a *G) bool { gid, _, _ := fields(a); return *id == gid },
			func(id *string) G { return denied(*id) })
	}
	return resp, nil
}

// authzListGroups: every group with CLUSTER DESCRIBE, else only the groups
// the principal may DESCRIBE. Kafka logs none of these refusals: listing
// is not asking for a group.
//
// With cohort's filter (group.ListFilterTag) and a Groups that checks each
// group as it lists them (GroupsListing), the check is handed down, so the
// filter's counts and limit apply to the groups it allows; the answer's
// groups are checked again here all the same.
func (s *Server) authzListGroups(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	clusterOK := s.allowed(c, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName)
	describes := func(id string) bool { return s.allowed(c, acl.OpDescribe, acl.ResourceGroup, id) }
	var got kmsg.Response
	var err error
	q := r.req.(*kmsg.ListGroupsRequest)
	lister, listing := s.cfg.Groups.(GroupsListing)
	if _, filtered := group.ListFilterRequested(q); filtered && listing && !clusterOK {
		got, err = lister.HandleListGroups(ctx, c, q, describes)
		got, err = s.groupsAnswer(r, got, err)
	} else {
		got, err = s.handleUnchecked(ctx, c, r)
	}
	if err != nil || clusterOK {
		return got, err
	}
	resp := got.(*kmsg.ListGroupsResponse)
	resp.Groups = keepIf(resp.Groups, func(g *kmsg.ListGroupsResponseGroup) bool { return describes(g.Group) })
	return resp, nil
}

// authzDeleteGroups: GROUP DELETE per group; refused groups are answered
// GROUP_AUTHORIZATION_FAILED and not deleted.
func (s *Server) authzDeleteGroups(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.DeleteGroupsRequest)
	denied := s.denials(c, r.key, acl.OpDelete, acl.ResourceGroup, len(req.Groups), func(i int) string { return req.Groups[i] })
	if denied == nil {
		return s.handleUnchecked(ctx, c, r)
	}
	sub := *req
	sub.Groups = kept(req.Groups, denied)
	got, err := s.forwardSome(ctx, c, r, &sub, len(sub.Groups) == 0)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.DeleteGroupsResponse)
	resp.Groups = merged(req.Groups, denied, resp.Groups,
		func(id *string, a *kmsg.DeleteGroupsResponseGroup) bool { return *id == a.Group },
		func(id *string) kmsg.DeleteGroupsResponseGroup {
			a := kmsg.NewDeleteGroupsResponseGroup()
			a.Group, a.ErrorCode = *id, codeGroupAuthz
			return a
		})
	return resp, nil
}

// authzOffsetDelete: GROUP DELETE (top-level GROUP_AUTHORIZATION_FAILED),
// then TOPIC READ per topic (TOPIC_AUTHORIZATION_FAILED on each partition
// of a refused topic, whose offsets are kept). As in Kafka the coordinator
// is asked even when no topic is left (its group-level checks still
// apply), and a top-level error from it replaces the per-topic answers.
func (s *Server) authzOffsetDelete(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetDeleteRequest)
	if !s.authorize(c, r.key, acl.OpDelete, acl.ResourceGroup, req.Group) {
		return group.ErrorResponse(req, codeGroupAuthz), nil
	}
	denied := s.denials(c, r.key, acl.OpRead, acl.ResourceTopic, len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	if denied == nil {
		return s.handleUnchecked(ctx, c, r)
	}
	sub := *req
	sub.Topics = kept(req.Topics, denied)
	got, err := s.forward(ctx, c, r, &sub)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != errNone {
		return resp, nil
	}
	resp.Topics = merged(req.Topics, denied, resp.Topics,
		func(t *kmsg.OffsetDeleteRequestTopic, a *kmsg.OffsetDeleteResponseTopic) bool {
			return t.Topic == a.Topic
		},
		func(t *kmsg.OffsetDeleteRequestTopic) kmsg.OffsetDeleteResponseTopic {
			a := kmsg.NewOffsetDeleteResponseTopic()
			a.Topic = t.Topic
			a.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(t.Partitions))
			for i, p := range t.Partitions {
				a.Partitions[i] = kmsg.NewOffsetDeleteResponseTopicPartition()
				a.Partitions[i].Partition, a.Partitions[i].ErrorCode = p.Partition, codeTopicAuthz
			}
			return a
		})
	return resp, nil
}

// authzFindCoordinator: GROUP DESCRIBE on a group key
// (GROUP_AUTHORIZATION_FAILED), TRANSACTIONAL_ID DESCRIBE on a transaction
// key (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), at the top level before v4
// and per key from v4; a refused key's coordinator is not revealed. Share
// keys (v6) need CLUSTER CLUSTER_ACTION, else every key is answered
// CLUSTER_AUTHORIZATION_FAILED, as Kafka's failed cluster check does.
func (s *Server) authzFindCoordinator(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.FindCoordinatorRequest)
	var (
		rt   acl.ResourceType
		code int16
	)
	switch {
	case req.CoordinatorType == coordinatorGroup:
		rt, code = acl.ResourceGroup, codeGroupAuthz
	case req.CoordinatorType == coordinatorTransaction:
		rt, code = acl.ResourceTransactionalID, codeTxnIDAuthz
	case req.CoordinatorType == coordinatorShare && r.version >= 6:
		if s.authorize(c, r.key, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
			return s.handleUnchecked(ctx, c, r)
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, len(req.CoordinatorKeys))
		for i, key := range req.CoordinatorKeys {
			resp.Coordinators[i] = kmsg.NewFindCoordinatorResponseCoordinator()
			resp.Coordinators[i].Key = key
			coordinatorRefused(&resp.Coordinators[i], codeClusterAuthz)
		}
		return resp, nil
	default: // invalid type: answered INVALID_REQUEST
		return s.handleUnchecked(ctx, c, r)
	}
	if r.version < 4 {
		if s.authorize(c, r.key, acl.OpDescribe, rt, req.CoordinatorKey) {
			return s.handleUnchecked(ctx, c, r)
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.ErrorMessage = code, errorMessage(code)
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
		return resp, nil
	}
	denied := s.denials(c, r.key, acl.OpDescribe, rt, len(req.CoordinatorKeys), func(i int) string { return req.CoordinatorKeys[i] })
	got, err := s.handleUnchecked(ctx, c, r)
	if err != nil || denied == nil {
		return got, err
	}
	resp := got.(*kmsg.FindCoordinatorResponse)
	for i := range resp.Coordinators {
		if i < len(denied) && denied[i] {
			coordinatorRefused(&resp.Coordinators[i], code)
		}
	}
	return resp, nil
}

// coordinatorRefused makes rc an error answer that names no node.
func coordinatorRefused(rc *kmsg.FindCoordinatorResponseCoordinator, code int16) {
	rc.ErrorCode, rc.ErrorMessage = code, errorMessage(code)
	rc.NodeID, rc.Host, rc.Port = -1, "", -1
}

// authzMetadata: TOPIC DESCRIBE per topic. A topic asked for by name that
// the principal may not describe is answered TOPIC_AUTHORIZATION_FAILED
// whether or not it exists, with no partitions and no topic ID; one asked
// for by ID (v12) keeps its ID, which Kafka does not consider secret, but
// not its name. An all-topics request leaves such topics out, silently.
// Topic and (v8-10) cluster authorized operations are answered when asked
// for; the cluster's are 0 without CLUSTER DESCRIBE, as in Kafka. cohort
// never auto-creates topics, so Kafka's CREATE checks do not arise.
func (s *Server) authzMetadata(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.MetadataRequest)
	got, err := s.handleUnchecked(ctx, c, r)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.MetadataResponse)
	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	var refused []bool // by index in resp.Topics
	if all {
		resp.Topics = keepIf(resp.Topics, func(t *kmsg.MetadataResponseTopic) bool {
			return t.Topic != nil && s.allowed(c, acl.OpDescribe, acl.ResourceTopic, *t.Topic)
		})
	} else {
		refused = s.metadataRefusals(c, r.key, req, resp)
	}
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if t.Topic != nil && t.ErrorCode != errInvalidRequest && (refused == nil || !refused[i]) {
				t.AuthorizedOperations = s.authz.AuthorizedOperations(c.Principal, c.Host, acl.ResourceTopic, *t.Topic)
			}
		}
	}
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if s.authorize(c, r.key, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
			resp.AuthorizedOperations = s.authz.AuthorizedOperations(c.Principal, c.Host, acl.ResourceCluster, acl.ClusterName)
		}
	}
	return resp, nil
}

// metadataRefusals replaces, in resp (the unchecked answer to req, which
// names topics), the topics c may not DESCRIBE, and returns which entries
// it replaced (nil: none). metadata answers each distinct name or ID once,
// in request order; the walk below repeats its de-duplication to pair
// answers with requests.
func (s *Server) metadataRefusals(c Client, key int16, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) []bool {
	var seenName map[string]bool
	var seenID map[[16]byte]bool
	if len(resp.Topics) != len(req.Topics) { // some were repeated
		seenName, seenID = map[string]bool{}, map[[16]byte]bool{}
	}
	var refused []bool
	i := 0
	for _, rt := range req.Topics {
		if seenName != nil {
			if rt.Topic != nil {
				if seenName[*rt.Topic] {
					continue
				}
				seenName[*rt.Topic] = true
			} else {
				if seenID[rt.TopicID] {
					continue
				}
				seenID[rt.TopicID] = true
			}
		}
		if i >= len(resp.Topics) {
			break
		}
		t := &resp.Topics[i]
		i++
		if t.Topic == nil || s.authorize(c, key, acl.OpDescribe, acl.ResourceTopic, *t.Topic) {
			continue // allowed, or an unknown topic ID: nothing to hide
		}
		e := kmsg.NewMetadataResponseTopic()
		e.ErrorCode = codeTopicAuthz
		e.Partitions = []kmsg.MetadataResponseTopicPartition{}
		if rt.Topic != nil {
			e.Topic = kmsg.StringPtr(*rt.Topic)
		} else {
			e.TopicID = rt.TopicID
			e.ErrorCode = errUnknownTopicID // hiddenByID: no DESCRIBE here
		}
		*t = e
		if refused == nil {
			refused = make([]bool, len(resp.Topics))
		}
		refused[i-1] = true
	}
	return refused
}

// authzCreateTopics: CLUSTER CREATE, or else TOPIC CREATE per topic
// (TOPIC_AUTHORIZATION_FAILED, "Authorization failed."). A topic named
// twice is INVALID_REQUEST before any check, as in Kafka. From v5 a created
// topic whose configuration the principal may not DESCRIBE_CONFIGS is
// answered without it: TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED and
// partition count and replication factor -1 (KRaft's controller).
func (s *Server) authzCreateTopics(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.CreateTopicsRequest)
	var denied []bool
	if !s.allowed(c, acl.OpCreate, acl.ResourceCluster, acl.ClusterName) {
		denied = s.uniqueDenials(c, r.key, acl.OpCreate, len(req.Topics), func(i int) string { return req.Topics[i].Topic })
		for i := range denied {
			// Never a topic anyone creates: INVALID_REQUEST whatever the
			// ACLs, as in Kafka (the handler answers it).
			if req.Topics[i].Topic == clusterMetadataTopic {
				denied[i] = false
			}
		}
		if !slices.Contains(denied, true) {
			denied = nil
		}
	}
	var resp *kmsg.CreateTopicsResponse
	if denied == nil {
		got, err := s.handleUnchecked(ctx, c, r)
		if err != nil {
			return nil, err
		}
		resp = got.(*kmsg.CreateTopicsResponse)
	} else {
		sub := *req
		sub.Topics = kept(req.Topics, denied)
		got, err := s.forward(ctx, c, r, &sub)
		if err != nil {
			return nil, err
		}
		resp = got.(*kmsg.CreateTopicsResponse)
		resp.Topics = merged(req.Topics, denied, resp.Topics, inOrder,
			func(t *kmsg.CreateTopicsRequestTopic) kmsg.CreateTopicsResponseTopic {
				a := kmsg.NewCreateTopicsResponseTopic()
				a.Topic, a.ErrorCode, a.ErrorMessage = t.Topic, codeTopicAuthz, kmsg.StringPtr("Authorization failed.")
				return a
			})
	}
	if req.Version >= 5 {
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if t.ErrorCode == errNone && !s.allowed(c, acl.OpDescribeConfigs, acl.ResourceTopic, t.Topic) {
				t.ConfigErrorCode, t.NumPartitions, t.ReplicationFactor = codeTopicAuthz, -1, -1
				t.Configs = t.Configs[:0] // cleared, as Kafka, not null
			}
		}
	}
	return resp, nil
}

// uniqueDenials is denials on TOPIC for the topics named once: a repeated
// name is not checked (the handler answers it INVALID_REQUEST), as in
// Kafka's CreateTopics and CreatePartitions.
func (s *Server) uniqueDenials(c Client, key int16, op acl.Operation, n int, name func(int) string) []bool {
	dups := duplicates(n, name)
	var denied []bool
	for i := 0; i < n; i++ {
		if dups[name(i)] || s.authorize(c, key, op, acl.ResourceTopic, name(i)) {
			continue
		}
		if denied == nil {
			denied = make([]bool, n)
		}
		denied[i] = true
	}
	return denied
}

// authzCreatePartitions: TOPIC ALTER per topic (TOPIC_AUTHORIZATION_FAILED);
// a repeated topic is INVALID_REQUEST before any check.
func (s *Server) authzCreatePartitions(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.CreatePartitionsRequest)
	denied := s.uniqueDenials(c, r.key, acl.OpAlter, len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	if denied == nil {
		return s.handleUnchecked(ctx, c, r)
	}
	sub := *req
	sub.Topics = kept(req.Topics, denied)
	got, err := s.forward(ctx, c, r, &sub)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.CreatePartitionsResponse)
	resp.Topics = merged(req.Topics, denied, resp.Topics, inOrder,
		func(t *kmsg.CreatePartitionsRequestTopic) kmsg.CreatePartitionsResponseTopic {
			a := kmsg.NewCreatePartitionsResponseTopic()
			a.Topic, a.ErrorCode = t.Topic, codeTopicAuthz
			return a
		})
	return resp, nil
}

// authzDeleteTopics follows KRaft's controller. CLUSTER DELETE allows
// every topic. Otherwise a topic named by the request is answered
// TOPIC_AUTHORIZATION_FAILED when the principal may not DESCRIBE it,
// whether or not it exists (existence is not revealed);
// UNKNOWN_TOPIC_OR_PARTITION when it may describe it and it does not
// exist; TOPIC_AUTHORIZATION_FAILED when it exists and may not be
// DELETEd. A topic named by ID (v6+) that does not exist is
// UNKNOWN_TOPIC_ID; one that may not be deleted is
// TOPIC_AUTHORIZATION_FAILED, with its name only if the principal may
// describe it. Refused topics are not deleted and never reach the catalog.
func (s *Server) authzDeleteTopics(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.DeleteTopicsRequest)
	if s.allowed(c, acl.OpDelete, acl.ResourceCluster, acl.ClusterName) {
		return s.handleUnchecked(ctx, c, r)
	}
	n := len(req.TopicNames)
	if req.Version >= 6 {
		n = len(req.Topics)
	}
	var refusals []*kmsg.DeleteTopicsResponseTopic // nil entries are forwarded
	denied := make([]bool, n)
	// An entry malformed in the request's shape (a name and an ID, a name
	// given twice) is INVALID_REQUEST whatever the ACLs say, as in Kafka:
	// forwarded unchecked, it is answered so and deletes nothing.
	shape := deleteShapeRefusals(req.Version, deleteTargets(req))
	for i := 0; i < n; i++ {
		if shape[i] != "" {
			continue
		}
		var name *string
		var id [16]byte
		if req.Version >= 6 {
			name, id = req.Topics[i].Topic, req.Topics[i].TopicID
		} else {
			name = &req.TopicNames[i]
		}
		if a := s.deleteRefusal(c, r.key, name, id); a != nil {
			if refusals == nil {
				refusals = make([]*kmsg.DeleteTopicsResponseTopic, n)
			}
			refusals[i], denied[i] = a, true
		}
	}
	if refusals == nil {
		return s.handleUnchecked(ctx, c, r)
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	sub := *req
	sub.TopicNames, sub.Topics = nil, nil
	if req.Version >= 6 {
		sub.Topics = kept(req.Topics, denied)
	} else {
		sub.TopicNames = kept(req.TopicNames, denied)
	}
	if len(sub.Topics)+len(sub.TopicNames) > 0 {
		got, err := s.forward(ctx, c, r, &sub)
		if err != nil {
			return nil, err
		}
		resp = got.(*kmsg.DeleteTopicsResponse)
	}
	got := resp.Topics
	resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, 0, n)
	next := 0
	for i := 0; i < n; i++ {
		switch {
		case refusals[i] != nil:
			resp.Topics = append(resp.Topics, *refusals[i])
		case next < len(got): // deleteTopics answers each target, in order
			resp.Topics = append(resp.Topics, got[next])
			next++
		}
	}
	return resp, nil
}

// deleteRefusal decides one DeleteTopics target, named by name or else by
// id, without CLUSTER DELETE: its answer when refused, nil when it may be
// deleted (or is an unknown ID, which deleteTopics answers).
func (s *Server) deleteRefusal(c Client, key int16, name *string, id [16]byte) *kmsg.DeleteTopicsResponseTopic {
	answer := func(name *string, id [16]byte, code int16) *kmsg.DeleteTopicsResponseTopic {
		a := kmsg.NewDeleteTopicsResponseTopic()
		a.Topic, a.TopicID, a.ErrorCode, a.ErrorMessage = name, id, code, errorMessage(code)
		return &a
	}
	if name == nil {
		t, ok := s.catalog.LookupID(id)
		if !ok || id == ([16]byte{}) || s.allowed(c, acl.OpDelete, acl.ResourceTopic, t.Name) {
			return nil
		}
		s.refuse(c, key, acl.OpDelete, acl.ResourceTopic, t.Name)
		if s.allowed(c, acl.OpDescribe, acl.ResourceTopic, t.Name) {
			return answer(kmsg.StringPtr(t.Name), id, codeTopicAuthz)
		}
		return answer(nil, id, s.hiddenByID(c, t.Name, true))
	}
	if !s.authorize(c, key, acl.OpDescribe, acl.ResourceTopic, *name) {
		return answer(name, [16]byte{}, codeTopicAuthz)
	}
	if s.allowed(c, acl.OpDelete, acl.ResourceTopic, *name) {
		return nil
	}
	s.refuse(c, key, acl.OpDelete, acl.ResourceTopic, *name)
	if _, ok := s.catalog.Lookup(*name); !ok {
		return answer(name, [16]byte{}, errUnknownTopicOrPartition)
	}
	return answer(name, [16]byte{}, codeTopicAuthz)
}
