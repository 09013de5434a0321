package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API describes one group-scoped Kafka API once, for every layer that
// handles it: the server (is it a group API, may it park, may its frame
// buffer be reused), the coordinator (which groups it addresses, how a
// request about groups of several partitions is split and its answers
// merged, what it answers while a partition loads or moves away) and the
// shard (which handler serves it). Adding an API, or a group type that
// serves an existing one differently, is a change to this table and to the
// handler, not to switches spread over packages.
type API struct {
	Key int16
	// Parks is true for requests that may wait for other members (the
	// join and sync barriers): the server watches such a connection for a
	// hang-up while the request waits, to abandon it.
	Parks bool
	// FrameFree is true when the decoded request keeps no reference to
	// its frame's bytes (no byte fields; kmsg copies strings), so that the
	// server may reuse the frame buffer at once: the hot path.
	FrameFree bool
	// Loading is the error code answered while the group's partition is
	// loading. Kafka answers most requests COORDINATOR_LOAD_IN_PROGRESS so
	// that clients retry; a Heartbeat gets NONE (the member keeps its
	// session; its state is not known yet) and a SyncGroup
	// REBALANCE_IN_PROGRESS (the member rejoins).
	Loading int16
	// Groups returns the group ids the request addresses. multi is true for
	// a request about a list of groups, which the coordinator splits by
	// partition (Split) and whose answers it merges (Merge). all is true
	// for a request about every group (ListGroups): every partition is
	// asked and the answers are merged.
	Groups func(req kmsg.Request) (ids []string, multi, all bool)
	// Group, for a request about exactly one group, returns its id
	// without the slice Groups allocates (the hot path: heartbeats,
	// commits). Groups is derived from it for those requests.
	Group func(req kmsg.Request) string
	// Split returns the part of a multi-group request about the groups at
	// the positions idx of the original request.
	Split func(req kmsg.Request, idx []int) kmsg.Request
	// Merge combines the answers of the parts of a multi-group (or
	// all-group) request into the answer to req, in req's order. For an
	// all-group request parts holds every partition's answer, partition
	// i's at i (ListGroups counts its groups by partition).
	Merge func(req kmsg.Request, parts []kmsg.Response) kmsg.Response
	// Error answers req with code wherever the response can carry an
	// error (NOT_COORDINATOR, loading, unavailable).
	Error func(req kmsg.Request, code int16) kmsg.Response
	// Precheck, if set, returns the error of a request refused on its own
	// content, before anything about its group (ownership, loading) is
	// looked at, as Kafka does: an empty group id (INVALID_GROUP_ID for the
	// APIs that need one), a SyncGroup v5+ without protocol type or name.
	// ErrNone lets the request through.
	Precheck func(req kmsg.Request) int16
	// Serve runs the request against the shard. It replies through out,
	// at once or, for a request that parks or writes, later.
	Serve func(s *Shard, now time.Time, t Ticket, c Client, req kmsg.Request, out *Output)
}

// LookupAPI returns the description of a group-scoped API key, or nil for
// keys that are not group-scoped.
func LookupAPI(key int16) *API {
	if key < 0 || int(key) >= len(apiByKey) {
		return nil
	}
	return apiByKey[key]
}

// APIs returns the group-scoped APIs, by key.
func APIs() []*API {
	out := make([]*API, 0, len(apiTable))
	for i := range apiTable {
		out = append(out, &apiTable[i])
	}
	return out
}

// ErrorResponse builds req's response carrying code everywhere an error can
// be reported. It returns nil for request types that are not group-scoped.
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	if a := LookupAPI(req.Key()); a != nil {
		return a.Error(req, code)
	}
	return nil
}

// Handle serves one group-scoped request against the shard (API.Serve).
// It returns false, doing nothing, for a request of another API.
func (s *Shard) Handle(now time.Time, t Ticket, c Client, req kmsg.Request, out *Output) bool {
	a := LookupAPI(req.Key())
	if a == nil {
		return false
	}
	a.Serve(s, now, t, c, req, out)
	return true
}

var apiByKey = func() []*API {
	var maxKey int16
	for _, a := range apiTable {
		maxKey = max(maxKey, a.Key)
	}
	by := make([]*API, maxKey+1)
	for i := range apiTable {
		a := &apiTable[i]
		if one := a.Group; one != nil && a.Groups == nil {
			a.Groups = func(r kmsg.Request) ([]string, bool, bool) { return []string{one(r)}, false, false }
		}
		by[a.Key] = a
	}
	return by
}()

// one is Groups for the requests about a single group.
func one(id string) ([]string, bool, bool) { return []string{id}, false, false }

var apiTable = []API{
	{
		Key:       kmsg.ConsumerGroupHeartbeat.Int16(),
		FrameFree: true,
		Loading:   ErrCoordinatorLoading,
		Group:     func(r kmsg.Request) string { return r.(*kmsg.ConsumerGroupHeartbeatRequest).Group },
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			resp.Version, resp.ErrorCode = r.GetVersion(), code
			return resp
		},
		Serve: func(s *Shard, now time.Time, t Ticket, c Client, r kmsg.Request, out *Output) {
			s.ConsumerGroupHeartbeat(now, t, c, r.(*kmsg.ConsumerGroupHeartbeatRequest), out)
		},
	},
	{
		Key:     kmsg.ConsumerGroupDescribe.Int16(),
		Loading: ErrCoordinatorLoading,
		Groups: func(r kmsg.Request) ([]string, bool, bool) {
			return r.(*kmsg.ConsumerGroupDescribeRequest).Groups, true, false
		},
		Split: func(r kmsg.Request, idx []int) kmsg.Request {
			q := r.(*kmsg.ConsumerGroupDescribeRequest)
			sub := *q
			sub.Groups = subset(q.Groups, idx)
			return &sub
		},
		Merge: func(r kmsg.Request, parts []kmsg.Response) kmsg.Response {
			q := r.(*kmsg.ConsumerGroupDescribeRequest)
			resp := kmsg.NewPtrConsumerGroupDescribeResponse()
			resp.Version = q.Version
			resp.Groups = mergeByGroup(q.Groups, parts,
				func(p kmsg.Response) []kmsg.ConsumerGroupDescribeResponseGroup {
					return p.(*kmsg.ConsumerGroupDescribeResponse).Groups
				},
				func(g *kmsg.ConsumerGroupDescribeResponseGroup) string { return g.Group })
			return resp
		},
		Error: consumerDescribeError,
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			q := r.(*kmsg.ConsumerGroupDescribeRequest)
			resp := kmsg.NewPtrConsumerGroupDescribeResponse()
			resp.Version = q.Version
			for _, id := range q.Groups {
				resp.Groups = append(resp.Groups, s.DescribeConsumerGroupAt(id, q.Version, q.IncludeAuthorizedOperations, now))
			}
			out.reply(t, resp)
		},
	},
	{
		Key:       kmsg.OffsetCommit.Int16(),
		FrameFree: true,
		Loading:   ErrCoordinatorLoading,
		Group:     func(r kmsg.Request) string { return r.(*kmsg.OffsetCommitRequest).Group },
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			return offsetCommitResponse(r.(*kmsg.OffsetCommitRequest), code)
		},
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			s.OffsetCommit(now, t, r.(*kmsg.OffsetCommitRequest), out)
		},
	},
	{
		Key:       kmsg.OffsetFetch.Int16(),
		FrameFree: true,
		Loading:   ErrCoordinatorLoading,
		Groups: func(r kmsg.Request) ([]string, bool, bool) {
			q := r.(*kmsg.OffsetFetchRequest)
			if q.Version < 8 {
				return one(q.Group)
			}
			ids := make([]string, len(q.Groups))
			for i, g := range q.Groups {
				ids[i] = g.Group
			}
			return ids, true, false
		},
		Split: func(r kmsg.Request, idx []int) kmsg.Request {
			q := r.(*kmsg.OffsetFetchRequest)
			sub := *q
			sub.Groups = subset(q.Groups, idx)
			return &sub
		},
		Merge: func(r kmsg.Request, parts []kmsg.Response) kmsg.Response {
			q := r.(*kmsg.OffsetFetchRequest)
			ids := make([]string, len(q.Groups))
			for i, g := range q.Groups {
				ids[i] = g.Group
			}
			resp := kmsg.NewPtrOffsetFetchResponse()
			resp.Version = q.Version
			resp.Groups = mergeByGroup(ids, parts,
				func(p kmsg.Response) []kmsg.OffsetFetchResponseGroup { return p.(*kmsg.OffsetFetchResponse).Groups },
				func(g *kmsg.OffsetFetchResponseGroup) string { return g.Group })
			return resp
		},
		Error: offsetFetchError,
		Serve: func(s *Shard, _ time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			s.ServeOffsetFetch(t, r.(*kmsg.OffsetFetchRequest), out)
		},
	},
	{
		Key:      kmsg.JoinGroup.Int16(),
		Parks:    true,
		Loading:  ErrCoordinatorLoading,
		Group:    func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group },
		Precheck: func(r kmsg.Request) int16 { return needGroupID(r.(*kmsg.JoinGroupRequest).Group) },
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			q := r.(*kmsg.JoinGroupRequest)
			return joinError(q.Version, code, q.MemberID)
		},
		Serve: func(s *Shard, now time.Time, t Ticket, c Client, r kmsg.Request, out *Output) {
			s.JoinGroup(now, t, c, r.(*kmsg.JoinGroupRequest), out)
		},
	},
	{
		Key:       kmsg.Heartbeat.Int16(),
		FrameFree: true,
		Loading:   ErrNone,
		Group:     func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group },
		Precheck:  func(r kmsg.Request) int16 { return needGroupID(r.(*kmsg.HeartbeatRequest).Group) },
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			resp := kmsg.NewPtrHeartbeatResponse()
			resp.Version, resp.ErrorCode = r.GetVersion(), code
			return resp
		},
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			s.Heartbeat(now, t, r.(*kmsg.HeartbeatRequest), out)
		},
	},
	{
		Key:      kmsg.LeaveGroup.Int16(),
		Loading:  ErrCoordinatorLoading,
		Group:    func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group },
		Precheck: func(r kmsg.Request) int16 { return needGroupID(r.(*kmsg.LeaveGroupRequest).Group) },
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			resp := kmsg.NewPtrLeaveGroupResponse()
			resp.Version, resp.ErrorCode = r.GetVersion(), code
			return resp
		},
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			s.LeaveGroup(now, t, r.(*kmsg.LeaveGroupRequest), out)
		},
	},
	{
		Key:      kmsg.SyncGroup.Int16(),
		Parks:    true,
		Loading:  ErrRebalanceInProgress,
		Group:    func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group },
		Precheck: func(r kmsg.Request) int16 { return syncPrecheck(r.(*kmsg.SyncGroupRequest)) },
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			return syncError(r.GetVersion(), code)
		},
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			s.SyncGroup(now, t, r.(*kmsg.SyncGroupRequest), out)
		},
	},
	{
		Key:     kmsg.DescribeGroups.Int16(),
		Loading: ErrCoordinatorLoading,
		Groups: func(r kmsg.Request) ([]string, bool, bool) {
			return r.(*kmsg.DescribeGroupsRequest).Groups, true, false
		},
		Split: func(r kmsg.Request, idx []int) kmsg.Request {
			q := r.(*kmsg.DescribeGroupsRequest)
			sub := *q
			sub.Groups = subset(q.Groups, idx)
			return &sub
		},
		Merge: func(r kmsg.Request, parts []kmsg.Response) kmsg.Response {
			q := r.(*kmsg.DescribeGroupsRequest)
			resp := kmsg.NewPtrDescribeGroupsResponse()
			resp.Version = q.Version
			resp.Groups = mergeByGroup(q.Groups, parts,
				func(p kmsg.Response) []kmsg.DescribeGroupsResponseGroup {
					return p.(*kmsg.DescribeGroupsResponse).Groups
				},
				func(g *kmsg.DescribeGroupsResponseGroup) string { return g.Group })
			return resp
		},
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			q := r.(*kmsg.DescribeGroupsRequest)
			resp := kmsg.NewPtrDescribeGroupsResponse()
			resp.Version = q.Version
			for _, id := range q.Groups {
				d := kmsg.NewDescribeGroupsResponseGroup()
				d.Group, d.ErrorCode = id, code
				d.AuthorizedOperations = -2147483648
				resp.Groups = append(resp.Groups, d)
			}
			return resp
		},
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			q := r.(*kmsg.DescribeGroupsRequest)
			resp := kmsg.NewPtrDescribeGroupsResponse()
			resp.Version = q.Version
			n, hist := HistoryRequested(q)
			maxMembers := -1 // MembersTag: every member unless asked
			if m, ok := MembersRequested(q); ok {
				maxMembers = int(m)
			}
			for _, id := range q.Groups {
				d := s.describeGroup(id, q.Version, q.IncludeAuthorizedOperations, maxMembers, now)
				if hist {
					// HistoryTag: asked for; consumer-protocol groups
					// carry it too (they answer as missing otherwise).
					if doc, ok := s.HistoryDoc(id, int(n), now); ok {
						if m, ok := HistoryListsRequested(q); ok {
							doc.BoundLists(int(m))
						}
						if err := SetHistoryTag(&d, doc); err != nil {
							s.logf("group %q: history: %v", id, err)
						}
					}
				}
				resp.Groups = append(resp.Groups, d)
			}
			out.reply(t, resp)
		},
	},
	{
		Key:     kmsg.ListGroups.Int16(),
		Loading: ErrCoordinatorLoading,
		Groups:  func(kmsg.Request) ([]string, bool, bool) { return nil, false, true },
		Merge: func(r kmsg.Request, parts []kmsg.Response) kmsg.Response {
			resp := kmsg.NewPtrListGroupsResponse()
			resp.Version = r.GetVersion()
			for _, p := range parts {
				// A partition still loading makes the list partial:
				// say so, so that the client retries. Partitions
				// another node owns are listed by their owner.
				if lr := p.(*kmsg.ListGroupsResponse); lr.ErrorCode == ErrCoordinatorLoading {
					resp.ErrorCode = lr.ErrorCode
				}
			}
			f, filtered := ListFilterRequested(r.(*kmsg.ListGroupsRequest))
			if filtered && f.Limit >= 0 {
				resp.Groups = mergeFirst(parts, f.Limit)
			} else {
				// Made once at its final size: grown by append, the
				// slice of a node's 100,000 groups allocated four
				// times what it holds.
				n := 0
				for _, p := range parts {
					n += len(p.(*kmsg.ListGroupsResponse).Groups)
				}
				resp.Groups = make([]kmsg.ListGroupsResponseGroup, 0, n)
				for _, p := range parts {
					resp.Groups = append(resp.Groups, p.(*kmsg.ListGroupsResponse).Groups...)
				}
			}
			if filtered {
				mergeListSummaries(resp, parts)
			}
			return resp
		},
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			resp := kmsg.NewPtrListGroupsResponse()
			resp.Version, resp.ErrorCode = r.GetVersion(), code
			return resp
		},
		Serve: func(s *Shard, _ time.Time, t Ticket, c Client, r kmsg.Request, out *Output) {
			q := r.(*kmsg.ListGroupsRequest)
			if f, ok := ListFilterRequested(q); ok {
				out.reply(t, s.listFiltered(q, f, c.Describes))
				return
			}
			resp := kmsg.NewPtrListGroupsResponse()
			resp.Version = q.Version
			resp.Groups = s.ListGroups(q)
			if c.Describes != nil {
				resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !c.Describes(g.Group) })
			}
			out.reply(t, resp)
		},
	},
	{
		Key:     kmsg.DeleteGroups.Int16(),
		Loading: ErrCoordinatorLoading,
		Groups: func(r kmsg.Request) ([]string, bool, bool) {
			return r.(*kmsg.DeleteGroupsRequest).Groups, true, false
		},
		Split: func(r kmsg.Request, idx []int) kmsg.Request {
			q := r.(*kmsg.DeleteGroupsRequest)
			sub := *q
			sub.Groups = subset(q.Groups, idx)
			return &sub
		},
		Merge: func(r kmsg.Request, parts []kmsg.Response) kmsg.Response {
			q := r.(*kmsg.DeleteGroupsRequest)
			resp := kmsg.NewPtrDeleteGroupsResponse()
			resp.Version = q.Version
			resp.Groups = mergeByGroup(q.Groups, parts,
				func(p kmsg.Response) []kmsg.DeleteGroupsResponseGroup { return p.(*kmsg.DeleteGroupsResponse).Groups },
				func(g *kmsg.DeleteGroupsResponseGroup) string { return g.Group })
			return resp
		},
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			q := r.(*kmsg.DeleteGroupsRequest)
			resp := kmsg.NewPtrDeleteGroupsResponse()
			resp.Version = q.Version
			for _, id := range q.Groups {
				d := kmsg.NewDeleteGroupsResponseGroup()
				d.Group, d.ErrorCode = id, code
				resp.Groups = append(resp.Groups, d)
			}
			return resp
		},
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			s.DeleteGroups(now, t, r.(*kmsg.DeleteGroupsRequest), out)
		},
	},
	{
		Key:      kmsg.OffsetDelete.Int16(),
		Loading:  ErrCoordinatorLoading,
		Group:    func(r kmsg.Request) string { return r.(*kmsg.OffsetDeleteRequest).Group },
		Precheck: func(r kmsg.Request) int16 { return needGroupID(r.(*kmsg.OffsetDeleteRequest).Group) },
		Error: func(r kmsg.Request, code int16) kmsg.Response {
			resp := kmsg.NewPtrOffsetDeleteResponse()
			resp.Version, resp.ErrorCode = r.GetVersion(), code
			return resp
		},
		Serve: func(s *Shard, now time.Time, t Ticket, _ Client, r kmsg.Request, out *Output) {
			s.OffsetDelete(now, t, r.(*kmsg.OffsetDeleteRequest), out)
		},
	},
}

// needGroupID is the Precheck of the APIs that need a non-empty group id.
func needGroupID(id string) int16 {
	if id == "" {
		return ErrInvalidGroupID
	}
	return ErrNone
}

// syncPrecheck is SyncGroup's Precheck: from v5 the protocol type and name
// must be present (Kafka checks it first of all), and the group id not empty.
func syncPrecheck(r *kmsg.SyncGroupRequest) int16 {
	if r.Version >= 5 && (r.ProtocolType == nil || r.Protocol == nil) {
		return ErrInconsistentProtocol
	}
	return needGroupID(r.Group)
}

// subset returns the elements of list at the positions idx.
func subset[T any](list []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, x := range idx {
		out[i] = list[x]
	}
	return out
}

// mergeByGroup returns one entry per id, in ids' order, taken from the
// parts' answers (groupsOf) by group id (id). An id the request names twice
// gets its answers in the order its partition gave them (Kafka answers every
// entry, duplicates included).
func mergeByGroup[G any](ids []string, parts []kmsg.Response, groupsOf func(kmsg.Response) []G, id func(*G) string) []G {
	got := make(map[string][]G, len(ids))
	for _, p := range parts {
		gs := groupsOf(p)
		for i := range gs {
			k := id(&gs[i])
			got[k] = append(got[k], gs[i])
		}
	}
	out := make([]G, len(ids))
	for i, x := range ids {
		if q := got[x]; len(q) > 0 {
			out[i], got[x] = q[0], q[1:]
		}
	}
	return out
}

// consumerDescribeError answers a ConsumerGroupDescribe with code for every group.
func consumerDescribeError(r kmsg.Request, code int16) kmsg.Response {
	q := r.(*kmsg.ConsumerGroupDescribeRequest)
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	resp.Version = q.Version
	for _, id := range q.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group, d.ErrorCode = id, code
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// offsetFetchError answers an OffsetFetch with code: per group from v8, at
// the top level from v2, and on every asked partition before v2 (which has
// no top-level error field).
func offsetFetchError(r kmsg.Request, code int16) kmsg.Response {
	q := r.(*kmsg.OffsetFetchRequest)
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = q.Version
	if q.Version >= 8 {
		for _, rg := range q.Groups {
			gr := kmsg.NewOffsetFetchResponseGroup()
			gr.Group, gr.ErrorCode = rg.Group, code
			resp.Groups = append(resp.Groups, gr)
		}
		return resp
	}
	resp.ErrorCode = code
	if q.Version < 2 {
		for _, rt := range q.Topics {
			tr := kmsg.NewOffsetFetchResponseTopic()
			tr.Topic = rt.Topic
			for _, p := range rt.Partitions {
				pr := kmsg.NewOffsetFetchResponseTopicPartition()
				pr.Partition, pr.Offset, pr.ErrorCode = p, -1, code
				tr.Partitions = append(tr.Partitions, pr)
			}
			resp.Topics = append(resp.Topics, tr)
		}
	}
	return resp
}
