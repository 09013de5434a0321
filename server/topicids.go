package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/acl"
)

// OffsetCommit and OffsetFetch name topics by ID from version 10 (the
// versions Kafka 4.2 added for the consumer protocol), where every earlier
// version names them. Kafka's API layer turns the IDs into names from its
// metadata before anything else reads the request, answers an ID it does not
// know UNKNOWN_TOPIC_ID, and writes the IDs back into the answer: the group
// coordinator, the ACL checks on topics and the partition checks only ever see
// names. cohort does the same with its catalog, so everything after this
// step (authorization, the catalog's partition check, Groups) is the same
// for every version.
//
// A topic outside the catalog has no ID a client could have learned from
// cohort's metadata: a v10 commit cannot name it, and a v10 fetch of all of
// a group's offsets leaves it out, as Kafka leaves out a topic whose ID it
// can no longer find. Its offsets stay readable and writable through v9 and
// below, which is what clients send for topics they have no ID for.

// handleByTopicID answers an OffsetCommit or OffsetFetch of v10 or later
// (handle sends only those here).
func (s *Server) handleByTopicID(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	if r.key == keyOffsetCommit {
		return s.commitByTopicID(ctx, c, r)
	}
	return s.fetchByTopicID(ctx, c, r)
}

// topicName resolves a topic ID of a request; false for the zero ID and for
// an ID no catalog topic has.
func (s *Server) topicName(id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return "", false
	}
	return s.catalog.Name(id)
}

// With ACLs on, a topic asked for by ID that the principal may not DESCRIBE
// is answered UNKNOWN_TOPIC_ID, like an ID no topic has: cohort's IDs can be
// computed from names (catalog.TopicID), so answering it otherwise would
// tell anyone whether a guessed topic exists (security.md, "Topic IDs").
// The ACL checks themselves are the same as for every other version (they
// run after the names are known, and count and log each refusal); a topic
// they refuse is answered TOPIC_AUTHORIZATION_FAILED, which is then turned
// into UNKNOWN_TOPIC_ID where the principal may not describe the topic. So a
// commit the ACLs allow costs no more checks than one by name.

// commitByTopicID serves OffsetCommit v10+: the topics are named from their
// IDs and the request goes on as any other version does; a topic whose ID is
// unknown is answered UNKNOWN_TOPIC_ID on each of its partitions and left
// out. As in Kafka the group's READ comes first (a refused group is the
// answer for every topic, known or not), and when no topic is left the
// coordinator is not asked.
func (s *Server) commitByTopicID(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetCommitRequest)
	var unknown []bool
	for i := range req.Topics {
		t := &req.Topics[i]
		name, ok := s.topicName(t.TopicID)
		t.Topic = name
		if !ok {
			if unknown == nil {
				unknown = make([]bool, len(req.Topics))
			}
			unknown[i] = true
		}
	}
	var resp *kmsg.OffsetCommitResponse
	switch {
	case unknown == nil:
		got, err := s.dispatch(ctx, c, r)
		if err != nil {
			return nil, err
		}
		resp = got.(*kmsg.OffsetCommitResponse)
	case s.authz != nil && !s.authorize(c, r.key, acl.OpRead, acl.ResourceGroup, req.Group):
		resp = group.ErrorResponse(req, codeGroupAuthz).(*kmsg.OffsetCommitResponse)
	default:
		resp = req.ResponseKind().(*kmsg.OffsetCommitResponse)
		if sub := kept(req.Topics, unknown); len(sub) > 0 {
			fwd := *req
			fwd.Topics = sub
			got, err := s.dispatch(ctx, c, &request{key: r.key, version: r.version, corr: r.corr, clientID: r.clientID, req: &fwd})
			if err != nil {
				return nil, err
			}
			resp = got.(*kmsg.OffsetCommitResponse)
		}
		resp.Topics = merged(req.Topics, unknown, resp.Topics,
			func(t *kmsg.OffsetCommitRequestTopic, a *kmsg.OffsetCommitResponseTopic) bool {
				return t.Topic == a.Topic
			},
			func(t *kmsg.OffsetCommitRequestTopic) kmsg.OffsetCommitResponseTopic {
				return commitRefused(t, errUnknownTopicID)
			})
	}
	if s.authz != nil {
		for i := range resp.Topics {
			a := &resp.Topics[i]
			if len(a.Partitions) > 0 && a.Partitions[0].ErrorCode == codeTopicAuthz && !s.allowed(c, acl.OpDescribe, acl.ResourceTopic, a.Topic) {
				for j := range a.Partitions {
					a.Partitions[j].ErrorCode = errUnknownTopicID
				}
			}
		}
	}
	putCommitIDs(req, resp)
	return resp, nil
}

// putCommitIDs writes into each answered topic the ID its request topic
// gave. The answers come in request order (a repeated topic may be answered
// once), so each is matched by name from where the previous one matched;
// unknown IDs are answered under the empty name, which matches their own
// request topic. Groups's answers are built for each request, so the server
// may write into them (server.Groups).
func putCommitIDs(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	next := 0
	for i := range resp.Topics {
		a := &resp.Topics[i]
		if k := idFor(req.Topics, next, func(t *kmsg.OffsetCommitRequestTopic) bool { return t.Topic == a.Topic }); k >= 0 {
			a.TopicID, next = req.Topics[k].TopicID, k+1
		}
	}
}

// idFor returns the index of the first request topic that is (looking from
// next on, then from the start), or -1 if none is.
func idFor[T any](topics []T, next int, is func(*T) bool) int {
	for k := next; k < len(topics); k++ {
		if is(&topics[k]) {
			return k
		}
	}
	for k := 0; k < next && k < len(topics); k++ {
		if is(&topics[k]) {
			return k
		}
	}
	return -1
}

// fetchByTopicID serves OffsetFetch v10+ (always the multi-group shape):
// each listed topic is named from its ID; one whose ID is unknown is not
// asked of the coordinator and is answered UNKNOWN_TOPIC_ID on each of its
// partitions (offset -1), unless its group's answer is a group-level error,
// which stands alone as in every version. The ACL checks are those of v8+;
// a listed topic they refuse (the principal may not DESCRIBE it) is
// answered UNKNOWN_TOPIC_ID too. A group asked for all its topics gets those
// of the catalog, with their IDs, and no other.
func (s *Server) fetchByTopicID(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetFetchRequest)
	var unknown [][]bool // per group; nil: every ID known
	for i := range req.Groups {
		g := &req.Groups[i]
		for j := range g.Topics {
			t := &g.Topics[j]
			name, ok := s.topicName(t.TopicID)
			t.Topic = name
			if !ok {
				if unknown == nil {
					unknown = make([][]bool, len(req.Groups))
				}
				if unknown[i] == nil {
					unknown[i] = make([]bool, len(g.Topics))
				}
				unknown[i][j] = true
			}
		}
	}
	fwd := r
	if unknown != nil {
		sub := *req
		sub.Groups = make([]kmsg.OffsetFetchRequestGroup, len(req.Groups))
		for i, g := range req.Groups {
			if unknown[i] != nil {
				g.Topics = kept(g.Topics, unknown[i]) // never nil: an empty list is not "all topics"
			}
			sub.Groups[i] = g
		}
		fwd = &request{key: r.key, version: r.version, corr: r.corr, clientID: r.clientID, req: &sub}
	}
	got, err := s.dispatch(ctx, c, fwd)
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.OffsetFetchResponse)
	next := 0
	for i := range resp.Groups {
		a := &resp.Groups[i]
		k := idFor(req.Groups, next, func(g *kmsg.OffsetFetchRequestGroup) bool { return g.Group == a.Group })
		if k < 0 {
			continue
		}
		next = k + 1
		if a.ErrorCode != errNone {
			continue
		}
		g := &req.Groups[k]
		if g.Topics == nil {
			a.Topics = s.catalogTopicsOnly(a.Topics)
			continue
		}
		if unknown != nil && unknown[k] != nil {
			a.Topics = merged(g.Topics, unknown[k], a.Topics,
				func(t *kmsg.OffsetFetchRequestGroupTopic, a *kmsg.OffsetFetchResponseGroupTopic) bool {
					return t.Topic == a.Topic
				},
				func(t *kmsg.OffsetFetchRequestGroupTopic) kmsg.OffsetFetchResponseGroupTopic {
					return fetchRefused(t, errUnknownTopicID)
				})
		}
		nt := 0
		for j := range a.Topics {
			at := &a.Topics[j]
			if n := idFor(g.Topics, nt, func(t *kmsg.OffsetFetchRequestGroupTopic) bool { return t.Topic == at.Topic }); n >= 0 {
				at.TopicID, nt = g.Topics[n].TopicID, n+1
			}
			for p := range at.Partitions {
				if at.Partitions[p].ErrorCode == codeTopicAuthz { // only the ACL layer answers it: refused DESCRIBE
					at.Partitions[p].ErrorCode = errUnknownTopicID
				}
			}
		}
	}
	return resp, nil
}

// catalogTopicsOnly returns the topics of an all-topics answer that the
// catalog has, each given its ID; the others cannot be named at v10. The
// result is a copy: an answer the coordinator may share is not changed.
func (s *Server) catalogTopicsOnly(topics []kmsg.OffsetFetchResponseGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(topics))
	for _, t := range topics {
		if ct, ok := s.catalog.Lookup(t.Topic); ok {
			t.TopicID = ct.ID
			out = append(out, t)
		}
	}
	return out
}
