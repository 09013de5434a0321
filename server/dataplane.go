package server

// Data-plane requests on catalog topics.
//
// cohort stores no records, yet a stock Kafka consumer of a catalog topic
// asks the partitions' leader for offsets and records as soon as it has
// its assignment. So that it joins, idles and commits without errors, each
// catalog partition is presented as an empty partition of a healthy
// broker: log start offset = high watermark = last stable offset = 0, and
// leader epoch 0 (the epoch Metadata gives every partition). The answers
// below are those an Apache Kafka broker gives for such a partition; where
// Kafka's rules depend on a log cohort does not have, the choice is said at
// the function. docs/compatibility.md ("Data-plane requests on catalog
// topics") has the summary.

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/sasl"
)

// Kafka error codes of the data-plane APIs.
const (
	errOffsetOutOfRange       int16 = 1
	errFetchSessionIDNotFound int16 = 70
	errFencedLeaderEpoch      int16 = 74
	errUnknownLeaderEpoch     int16 = 75
)

// catalogLeaderEpoch is the leader epoch of every catalog partition: the
// one Metadata reports. Partitions never change leader, so it never grows.
const catalogLeaderEpoch int32 = 0

// noEpoch is Kafka's "no leader epoch" (-1) in requests and answers.
const noEpoch int32 = -1

// ListOffsets' special timestamps.
const (
	tsLatest                int64 = -1
	tsEarliest              int64 = -2
	tsMaxTimestamp          int64 = -3 // KIP-734, v7+
	tsEarliestLocal         int64 = -4 // KIP-405, v8+
	tsLatestTiered          int64 = -5 // KIP-1005, v9+
	tsEarliestPendingUpload int64 = -6 // KIP-1023, v11+
)

// Fetch session epochs (KIP-227).
const (
	sessionInitialEpoch int32 = 0  // a full fetch asking for a new session
	sessionFinalEpoch   int32 = -1 // a full fetch without a session
)

// fetchHoldCap bounds how long a Fetch is held (its MaxWaitMillis). Stock
// consumers ask for 0.5 s (librdkafka, Java, sarama) to 10 s (kafka-go's
// Reader) by default; a larger wait only delays the answer a client will
// get anyway, and 30 s stays below the usual 30-60 s request timeouts.
const fetchHoldCap = 30 * time.Second

// produceRefusedMessage is the ErrorMessage (Produce v8+) of every
// partition of a Produce to a catalog topic.
const produceRefusedMessage = "cohort stores no records: its topics exist for consumer-group coordination only, Produce is not supported"

// noRecords is the (empty, non-null) record set of every Fetch answer, as
// Kafka's MemoryRecords.EMPTY. Shared: encoding only reads it.
var noRecords = []byte{}

// noAborted is the aborted-transaction list of a READ_COMMITTED fetch of an
// empty partition: empty rather than null, as Kafka answers it.
var noAborted = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}

// topicGate decides a topic of a request before it is looked up: errNone
// lets it through, another code answers each of its partitions with that
// code. A nil gate lets every topic through. The authorization rules
// (authz*) pass one; unchecked requests pass nil. byID says the request
// named the topic by its ID.
type topicGate func(topic string, byID bool) int16

func (g topicGate) check(topic string, byID bool) int16 {
	if g == nil {
		return errNone
	}
	return g(topic, byID)
}

// dataTopic resolves one topic of a data-plane request, by ID when byID
// (Fetch v13+, Produce v13+) and by name otherwise: its partition count,
// or the code answering all its partitions. As in Kafka an unknown ID is
// UNKNOWN_TOPIC_ID before any authorization, and a named topic is
// authorized (gate) before its existence is revealed.
func (s *Server) dataTopic(byID bool, name string, id [16]byte, gate topicGate) (int32, int16) {
	if byID {
		t, ok := s.catalog.LookupID(id)
		if !ok || id == ([16]byte{}) {
			return 0, errUnknownTopicID
		}
		name = t.Name
	}
	if code := gate.check(name, byID); code != errNone {
		return 0, code
	}
	t, ok := s.catalog.Lookup(name)
	if !ok {
		return 0, errUnknownTopicOrPartition
	}
	return t.Partitions, errNone
}

// partitionCode checks partition p of a topic with n partitions (code is
// the topic's own code, from dataTopic).
func partitionCode(code int16, n, p int32) int16 {
	if code == errNone && (p < 0 || p >= n) {
		return errUnknownTopicOrPartition
	}
	return code
}

// epochCode is Kafka's check of a client's current leader epoch against
// the partition's (0): -1 skips the check, an older epoch is
// FENCED_LEADER_EPOCH and a newer one UNKNOWN_LEADER_EPOCH.
func epochCode(current int32) int16 {
	switch {
	case current == noEpoch || current == catalogLeaderEpoch:
		return errNone
	case current < catalogLeaderEpoch:
		return errFencedLeaderEpoch
	default:
		return errUnknownLeaderEpoch
	}
}

// fetch answers a Fetch (v4+). Every known partition fetched at offset 0
// is answered with no records, high watermark, last stable offset and log
// start offset 0. As in Kafka (KafkaApis, ReplicaManager.readFromLog):
//   - topics refused by gate are TOPIC_AUTHORIZATION_FAILED, unknown ones
//     UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by ID, v13+), a current
//     leader epoch other than 0 (v9+) FENCED or UNKNOWN_LEADER_EPOCH, and
//     any offset but 0 OFFSET_OUT_OF_RANGE (the log is [0, 0)); an error
//     partition has -1 offsets and no records;
//   - fetch sessions (v7+) are declined the way a broker whose session
//     cache is full declines them: a full fetch (session epoch 0 or -1) is
//     answered in full with SessionID 0, which tells the client to go on
//     without a session (franz-go then stops asking; librdkafka never asks);
//     an incremental fetch (any other epoch) names a session cohort never
//     created and is answered FETCH_SESSION_ID_NOT_FOUND, with no topics.
//
// The hold for MaxWaitMillis is the connection's (holdFetch, fetchHold):
// this answer is decided when the request arrives.
func (s *Server) fetch(req *kmsg.FetchRequest, gate topicGate) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	v := req.Version
	if v >= 7 && req.SessionEpoch != sessionInitialEpoch && req.SessionEpoch != sessionFinalEpoch {
		resp.ErrorCode = errFetchSessionIDNotFound
		return resp
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		at := &resp.Topics[i]
		*at = kmsg.NewFetchResponseTopic()
		at.Topic, at.TopicID = rt.Topic, rt.TopicID
		n, code := s.dataTopic(v >= 13, rt.Topic, rt.TopicID, gate)
		at.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			ap := &at.Partitions[j]
			*ap = kmsg.NewFetchResponseTopicPartition()
			ap.Partition = rp.Partition
			ap.RecordBatches = noRecords
			pc := partitionCode(code, n, rp.Partition)
			if pc == errNone && v >= 9 {
				pc = epochCode(rp.CurrentLeaderEpoch)
			}
			if pc == errNone && rp.FetchOffset != 0 {
				pc = errOffsetOutOfRange
			}
			ap.ErrorCode = pc
			if pc != errNone {
				ap.HighWatermark, ap.LastStableOffset, ap.LogStartOffset = -1, -1, -1
				continue
			}
			ap.HighWatermark, ap.LastStableOffset, ap.LogStartOffset = 0, 0, 0
			if req.IsolationLevel == 1 {
				ap.AbortedTransactions = noAborted
			}
		}
	}
	return resp
}

// isFollowerFetch reports whether a Fetch comes from a replica (a broker)
// rather than a consumer.
func isFollowerFetch(req *kmsg.FetchRequest) bool {
	if req.Version >= 15 {
		return req.ReplicaState.ID >= 0
	}
	return req.ReplicaID >= 0
}

// fetchHold is how long the connection holds the answer resp to req
// before writing it: MaxWaitMillis (at most fetchHoldCap) when Kafka would
// park the fetch in its purgatory waiting for data, 0 when it answers at
// once. Kafka answers at once when the fetch does not want to wait
// (MaxWaitMillis <= 0, or MinBytes <= 0, which the 0 bytes read already
// satisfy), when the session is in error, when no partition is left to
// read after the authorization and existence checks, or when reading a
// partition fails (out of range offset, leader epoch). Partitions refused
// or unknown to the metadata do not end the wait for the others.
func fetchHold(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) time.Duration {
	if req.MaxWaitMillis <= 0 || req.MinBytes <= 0 || resp.ErrorCode != errNone {
		return 0
	}
	readable := false
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			switch resp.Topics[i].Partitions[j].ErrorCode {
			case errNone:
				readable = true
			case codeTopicAuthz, errUnknownTopicOrPartition, errUnknownTopicID:
			default:
				return 0
			}
		}
	}
	if !readable {
		return 0
	}
	return min(time.Duration(req.MaxWaitMillis)*time.Millisecond, fetchHoldCap)
}

// holdFetch holds the connection's current Fetch answer for d, in the
// connection's own goroutine: it waits for the client's next bytes with a
// read deadline d away. The wait ends, and the answer is written, when d
// has passed, when the server shuts down gracefully (drain moves the
// deadline to now), or when the client has already sent its next request:
// Kafka would hold the fetch and leave that request waiting, cohort answers
// the fetch at once so that the request (a heartbeat on a client's single
// connection, as sarama has) is not delayed, and a client sending one
// request at a time still costs one Fetch per MaxWaitMillis. A hang-up or
// a closed socket (Close) ends the wait and the connection: false.
func (c *conn) holdFetch(d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	if c.ctx.Err() != nil { // drained or closed before the deadline was set
		return true
	}
	if f := holdStarted.Load(); f != nil {
		(*f)()
	}
	_, err := c.br.Peek(1)
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		c.cancel() // hang-up
		return false
	}
	if c.ctx.Err() == nil {
		c.nc.SetReadDeadline(time.Time{})
	}
	return true
}

// holdStarted, when set (by tests), is called when a connection starts
// holding a Fetch answer.
var holdStarted atomic.Pointer[func()]

// afterDataPlane finishes the requests whose answer involves the
// connection: a Fetch is held (fetchHold, holdFetch); a refused Produce is
// logged once per connection, and at most burstLogMax times a window over
// all connections (prodLog: an acks=0 producer reconnects after every
// Produce), and with acks=0 ends the connection. false: close the
// connection without writing resp.
func (c *conn) afterDataPlane(r *request, resp kmsg.Response, start time.Time) bool {
	switch r.key {
	case keyFetch:
		if d := fetchHold(r.req.(*kmsg.FetchRequest), resp.(*kmsg.FetchResponse)); d > 0 {
			return c.holdFetch(d)
		}
	case keyProduce:
		req := r.req.(*kmsg.ProduceRequest)
		if !c.produceLogged {
			c.produceLogged = true
			c.s.prodLog.info(c.logger(), "refusing Produce: cohort stores no records (logged once per connection)",
				"client_id", sasl.LogText(r.clientID), "api_version", r.version, "acks", req.Acks, "topics", len(req.Topics))
		}
		if req.Acks == 0 {
			// The producer reads no answer: Kafka closes the
			// connection when an acks=0 produce fails, so that the
			// client notices.
			c.s.metrics.observe(r.key, resp, time.Since(start))
			return false
		}
	}
	return true
}

// listOffsets answers ListOffsets. Per partition, in Kafka's order
// (KafkaApis, then ReplicaManager.fetchOffset, Partition and UnifiedLog):
// topic refused by gate TOPIC_AUTHORIZATION_FAILED; listed twice in the
// request (v1+) INVALID_REQUEST; a negative timestamp that is not one of
// the special values of the request's version UNSUPPORTED_VERSION; unknown
// topic or partition UNKNOWN_TOPIC_OR_PARTITION; a current leader epoch
// (v4+) other than 0 FENCED or UNKNOWN_LEADER_EPOCH. Errors carry
// timestamp, offset and leader epoch -1 (v0: no offsets). Otherwise, for an
// empty partition of a broker without tiered storage:
//   - latest (-1), earliest (-2), earliest local (-4): offset 0, timestamp
//     -1, leader epoch 0;
//   - max timestamp (-3), a timestamp lookup (>= 0): no record has one, so
//     offset, timestamp and leader epoch -1 with no error;
//   - latest tiered (-5), earliest pending upload (-6): nothing is tiered,
//     -1 likewise.
//
// v0 answers oldStyleOffsets.
func (s *Server) listOffsets(req *kmsg.ListOffsetsRequest, gate topicGate) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	v := req.Version
	var dups map[topicPartition]bool
	if v >= 1 {
		dups = duplicatePartitions(req)
	}
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		at := &resp.Topics[i]
		*at = kmsg.NewListOffsetsResponseTopic()
		at.Topic = rt.Topic
		code := gate.check(rt.Topic, false)
		var n int32
		if code == errNone {
			if t, ok := s.catalog.Lookup(rt.Topic); ok {
				n = t.Partitions
			}
		}
		at.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			ap := &at.Partitions[j]
			*ap = kmsg.NewListOffsetsResponseTopicPartition()
			ap.Partition = rp.Partition
			pc := code
			switch {
			case pc != errNone:
			case dups[topicPartition{rt.Topic, rp.Partition}]:
				pc = errInvalidRequest
			case v >= 1 && timestampUnsupported(rp.Timestamp, v):
				pc = errUnsupportedVersion
			case rp.Partition < 0 || rp.Partition >= n:
				pc = errUnknownTopicOrPartition
			case v >= 4:
				pc = epochCode(rp.CurrentLeaderEpoch)
			}
			ap.ErrorCode = pc
			switch {
			case pc != errNone: // the -1 defaults, no old-style offsets
			case v == 0:
				ap.OldStyleOffsets = oldStyleOffsets(rp.Timestamp, rp.MaxNumOffsets)
			case rp.Timestamp == tsLatest || rp.Timestamp == tsEarliest || rp.Timestamp == tsEarliestLocal:
				ap.Timestamp, ap.Offset, ap.LeaderEpoch = -1, 0, catalogLeaderEpoch
			default: // no record, or nothing tiered: the -1 defaults
			}
		}
	}
	return resp
}

// timestampUnsupported is Kafka's check of a ListOffsets v1+ timestamp: a
// negative one must be a special value that version v knows
// (ReplicaManager's timestampMinSupportedVersion).
func timestampUnsupported(ts int64, v int16) bool {
	if ts >= 0 {
		return false
	}
	var since int16
	switch ts {
	case tsLatest, tsEarliest:
		since = 1
	case tsMaxTimestamp:
		since = 7
	case tsEarliestLocal:
		since = 8
	case tsLatestTiered:
		since = 9
	case tsEarliestPendingUpload:
		since = 11
	default:
		return true
	}
	return v < since
}

// oldStyleOffsets answers ListOffsets v0 for an empty partition, as
// Kafka's legacy lookup (UnifiedLog.legacyFetchOffsetsBefore) does: the log
// is one empty segment starting at 0, so latest and earliest are [0], and
// a timestamp lists [0] when the segment was last modified at or before
// it. cohort does not know when a topic was created; it answers as if the
// empty segment were older than any timestamp >= 0, and newer than any
// other negative value (as Kafka's comparison with a real modification
// time is). MaxNumOffsets <= 0 lists nothing.
func oldStyleOffsets(ts int64, max int32) []int64 {
	if max <= 0 || ts < 0 && ts != tsLatest && ts != tsEarliest {
		return []int64{}
	}
	return []int64{0}
}

// topicPartition names one partition of a request.
type topicPartition struct {
	topic     string
	partition int32
}

// duplicatePartitions returns the partitions a ListOffsets request lists
// more than once (nil when none, the usual case, without allocating for a
// request of one partition).
func duplicatePartitions(req *kmsg.ListOffsetsRequest) map[topicPartition]bool {
	total := 0
	for _, t := range req.Topics {
		total += len(t.Partitions)
	}
	if total < 2 {
		return nil
	}
	seen := make(map[topicPartition]bool, total)
	var dups map[topicPartition]bool
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if seen[tp] {
				if dups == nil {
					dups = map[topicPartition]bool{}
				}
				dups[tp] = true
			}
			seen[tp] = true
		}
	}
	return dups
}

// offsetForLeaderEpoch answers OffsetForLeaderEpoch. Per partition: topic
// refused by gate TOPIC_AUTHORIZATION_FAILED, unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION, a current leader epoch (v2+) other than 0
// FENCED or UNKNOWN_LEADER_EPOCH (errors with epoch and end offset -1);
// otherwise the end of the requested epoch (epochEnd).
func (s *Server) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest, gate topicGate) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		at := &resp.Topics[i]
		*at = kmsg.NewOffsetForLeaderEpochResponseTopic()
		at.Topic = rt.Topic
		n, code := s.dataTopic(false, rt.Topic, [16]byte{}, gate)
		at.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			ap := &at.Partitions[j]
			*ap = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			ap.Partition = rp.Partition
			pc := partitionCode(code, n, rp.Partition)
			if pc == errNone && req.Version >= 2 {
				pc = epochCode(rp.CurrentLeaderEpoch)
			}
			ap.ErrorCode = pc
			if pc == errNone {
				ap.LeaderEpoch, ap.EndOffset = epochEnd(rp.LeaderEpoch)
			}
		}
	}
	return resp
}

// epochEnd is Kafka's LeaderEpochFileCache.endOffsetFor on the cache of an
// empty partition led since offset 0 in epoch 0, whose log ends at 0: epoch
// 0 (the current one) ends at the log end, 0; an undefined (-1) or a
// future epoch has no end (-1, -1); an epoch older than every known one is
// answered with itself and the start of the first known epoch, 0.
func epochEnd(epoch int32) (int32, int64) {
	switch {
	case epoch == catalogLeaderEpoch:
		return catalogLeaderEpoch, 0
	case epoch == noEpoch || epoch > catalogLeaderEpoch:
		return noEpoch, -1
	default:
		return epoch, 0
	}
}

// produce answers a Produce: cohort takes no records, and refuses them so
// that a producer fails clearly at once. Per
// partition, as Kafka checks them: txnCode (the transactional ID's
// authorization) if set, the topic's gate, unknown topic or partition
// (UNKNOWN_TOPIC_ID by ID, v13+); every other partition is refused with
// INVALID_REQUEST and produceRefusedMessage (v8+). Kafka has no code for
// "this broker takes no records"; INVALID_REQUEST is one every client
// treats as final (the records fail at once, no retries) and does not
// suggest an authorization or configuration problem the operator could
// fix, and the message says why.
func (s *Server) produce(req *kmsg.ProduceRequest, gate topicGate) kmsg.Response {
	return s.produceAnswer(req, gate, errNone)
}

func (s *Server) produceAnswer(req *kmsg.ProduceRequest, gate topicGate, txnCode int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		at := &resp.Topics[i]
		*at = kmsg.NewProduceResponseTopic()
		at.Topic, at.TopicID = rt.Topic, rt.TopicID
		n, code := int32(0), txnCode
		if code == errNone {
			n, code = s.dataTopic(req.Version >= 13, rt.Topic, rt.TopicID, gate)
		}
		at.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			ap := &at.Partitions[j]
			*ap = kmsg.NewProduceResponseTopicPartition()
			ap.Partition = rt.Partitions[j].Partition
			ap.BaseOffset = -1
			ap.ErrorCode = partitionCode(code, n, ap.Partition)
			if ap.ErrorCode == errNone {
				ap.ErrorCode, ap.ErrorMessage = errInvalidRequest, kmsg.StringPtr(produceRefusedMessage)
			}
		}
	}
	return resp
}

// commitInCatalog answers an OffsetCommit: the catalog is authoritative for
// its own topics, so a partition a catalog topic does not have is answered
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers a partition missing from its
// metadata, and never reaches Groups. Topics outside the catalog are
// committed as they are (their records live in a cluster cohort does not
// see). The rest is forwarded as a copy of the request and the answers are
// merged back in request order; if nothing is left Groups is not asked
// (Kafka). When every partition is valid, the request is forwarded as it is
// and nothing is allocated (for catalog topics without racks).
func (s *Server) commitInCatalog(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetCommitRequest)
	bad := s.uncommittable(req)
	if bad == nil {
		return s.groupsHandle(ctx, c, r)
	}
	sub := *req
	sub.Topics = withoutMissing(req.Topics, bad, func(t *kmsg.OffsetCommitRequestTopic) *[]kmsg.OffsetCommitRequestTopicPartition {
		return &t.Partitions
	})
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	if len(sub.Topics) > 0 {
		got, err := s.groupsHandle(ctx, c, &request{key: r.key, version: r.version, corr: r.corr, clientID: r.clientID, req: &sub})
		if err != nil {
			return nil, err
		}
		resp = got.(*kmsg.OffsetCommitResponse)
	}
	resp.Topics = mergeMissing(req.Topics, bad, resp.Topics, sameCommitTopic,
		func(t *kmsg.OffsetCommitRequestTopic) int { return len(t.Partitions) },
		func(a *kmsg.OffsetCommitResponseTopic) int { return len(a.Partitions) },
		func(t *kmsg.OffsetCommitRequestTopic, a *kmsg.OffsetCommitResponseTopic, from *kmsg.OffsetCommitResponseTopic, p, k int) {
			a.Topic = t.Topic
			if from != nil {
				a.Partitions = append(a.Partitions, from.Partitions[k])
				return
			}
			ap := kmsg.NewOffsetCommitResponseTopicPartition()
			ap.Partition, ap.ErrorCode = t.Partitions[p].Partition, errUnknownTopicOrPartition
			a.Partitions = append(a.Partitions, ap)
		})
	return resp, nil
}

// withoutMissing returns a copy of topics (an OffsetCommit's or
// OffsetDelete's) without the partitions marked in bad (missingPartitions),
// leaving out topics with none left; parts gives a topic's partitions.
func withoutMissing[T, P any](topics []T, bad [][]bool, parts func(*T) *[]P) []T {
	out := make([]T, 0, len(topics))
	for i, t := range topics {
		if bad[i] != nil {
			ps := parts(&t)
			*ps = kept(*ps, bad[i])
			if len(*ps) == 0 {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}

// mergeMissing returns the answers to topics (an OffsetCommit's or
// OffsetDelete's) in request order, where the partitions marked in bad
// (missingPartitions) were not forwarded and got holds the answers to the
// rest: a topic without such partitions takes its answer as it is; the
// others are rebuilt partition by partition, add(t, a, nil, p, _) answering
// t's p-th partition missing and add(t, a, from, _, k) taking the k-th
// answer of from, the topic's forwarded part.
func mergeMissing[T, A any](topics []T, bad [][]bool, got []A, same func(*T, *A) bool,
	nparts func(*T) int, nanswers func(*A) int, add func(t *T, a, from *A, p, k int)) []A {
	out := make([]A, 0, len(topics))
	next := 0
	for i := range topics {
		t := &topics[i]
		j := -1
		if bad[i] == nil || nparts(t) > countTrue(bad[i]) { // forwarded
			if j = answerFor(t, got, next, same); j >= 0 {
				next = j + 1
			}
		}
		if bad[i] == nil {
			if j >= 0 {
				out = append(out, got[j])
			}
			continue
		}
		var a A
		k := 0 // the next forwarded partition's answer, in got[j]
		for p := range nparts(t) {
			switch {
			case bad[i][p]:
				add(t, &a, nil, p, 0)
			case j >= 0 && k < nanswers(&got[j]):
				add(t, &a, &got[j], p, k)
				k++
			}
		}
		out = append(out, a)
	}
	return out
}

func sameCommitTopic(t *kmsg.OffsetCommitRequestTopic, a *kmsg.OffsetCommitResponseTopic) bool {
	return t.Topic == a.Topic
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// uncommittable returns, per topic of req, which partitions its catalog
// topic does not have, or no topic can have (a negative partition, a topic
// without a name: Kafka has them in no metadata and answers
// UNKNOWN_TOPIC_OR_PARTITION); nil for a topic without such partitions, and
// nil when there are none at all, the usual case, without allocating.
func (s *Server) uncommittable(req *kmsg.OffsetCommitRequest) [][]bool {
	return s.missingPartitions(len(req.Topics), func(i int) (string, int) { return req.Topics[i].Topic, len(req.Topics[i].Partitions) },
		func(i, j int) int32 { return req.Topics[i].Partitions[j].Partition })
}

// missingPartitions is uncommittable for n topics, the i-th called
// topic(i) with its partitions part(i, 0...).
func (s *Server) missingPartitions(n int, topic func(i int) (string, int), part func(i, j int) int32) [][]bool {
	var bad [][]bool
	for i := 0; i < n; i++ {
		name, np := topic(i)
		t, ok := s.catalog.Lookup(name)
		// A topic outside the catalog is taken, unless its name is one
		// no cluster can have (illegal characters, "..", too long).
		legal := ok || catalog.ValidateName(name) == nil
		for j := 0; j < np; j++ {
			if p := part(i, j); legal && p >= 0 && (!ok || p < t.Partitions) {
				continue
			}
			if bad == nil {
				bad = make([][]bool, n)
			}
			if bad[i] == nil {
				bad[i] = make([]bool, np)
			}
			bad[i][j] = true
		}
	}
	return bad
}

// offsetDeleteInCatalog answers an OffsetDelete as commitInCatalog does an
// OffsetCommit: a partition its catalog topic does not have is answered
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers a partition missing from
// its metadata, and the rest goes to Groups, which is asked even when
// nothing is left (its group-level answers still apply, as in Kafka); a
// top-level error from it is the answer.
func (s *Server) offsetDeleteInCatalog(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	req := r.req.(*kmsg.OffsetDeleteRequest)
	bad := s.missingPartitions(len(req.Topics), func(i int) (string, int) { return req.Topics[i].Topic, len(req.Topics[i].Partitions) },
		func(i, j int) int32 { return req.Topics[i].Partitions[j].Partition })
	if bad == nil {
		return s.groupsHandle(ctx, c, r)
	}
	sub := *req
	sub.Topics = withoutMissing(req.Topics, bad, func(t *kmsg.OffsetDeleteRequestTopic) *[]kmsg.OffsetDeleteRequestTopicPartition {
		return &t.Partitions
	})
	got, err := s.groupsHandle(ctx, c, &request{key: r.key, version: r.version, corr: r.corr, clientID: r.clientID, req: &sub})
	if err != nil {
		return nil, err
	}
	resp := got.(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != errNone {
		return resp, nil
	}
	resp.Topics = mergeMissing(req.Topics, bad, resp.Topics,
		func(t *kmsg.OffsetDeleteRequestTopic, a *kmsg.OffsetDeleteResponseTopic) bool {
			return t.Topic == a.Topic
		},
		func(t *kmsg.OffsetDeleteRequestTopic) int { return len(t.Partitions) },
		func(a *kmsg.OffsetDeleteResponseTopic) int { return len(a.Partitions) },
		func(t *kmsg.OffsetDeleteRequestTopic, a *kmsg.OffsetDeleteResponseTopic, from *kmsg.OffsetDeleteResponseTopic, p, k int) {
			a.Topic = t.Topic
			if from != nil {
				a.Partitions = append(a.Partitions, from.Partitions[k])
				return
			}
			ap := kmsg.NewOffsetDeleteResponseTopicPartition()
			ap.Partition, ap.ErrorCode = t.Partitions[p].Partition, errUnknownTopicOrPartition
			a.Partitions = append(a.Partitions, ap)
		})
	return resp, nil
}

// topicAuthzGate is the gate of a per-topic permission: op on each topic,
// refusals logged and counted, TOPIC_AUTHORIZATION_FAILED.
func (s *Server) topicAuthzGate(c Client, key int16, op acl.Operation) topicGate {
	return func(topic string, byID bool) int16 {
		if s.authorize(c, key, op, acl.ResourceTopic, topic) {
			return errNone
		}
		return s.hiddenByID(c, topic, byID)
	}
}

// refuseAllGate is the gate refusing every topic.
func (s *Server) refuseAllGate(c Client) topicGate {
	return func(topic string, byID bool) int16 { return s.hiddenByID(c, topic, byID) }
}

// hiddenByID is the code refusing an existing topic: TOPIC_AUTHORIZATION_FAILED,
// except for a topic named by its ID that the principal may not describe,
// which is answered UNKNOWN_TOPIC_ID as if it did not exist. Kafka answers
// TOPIC_AUTHORIZATION_FAILED there too, because its topic IDs are random and
// reveal nothing; cohort derives a topic's ID from its name, so that answer
// would let anyone test whether a topic of a guessed name exists.
func (s *Server) hiddenByID(c Client, topic string, byID bool) int16 {
	if byID && !s.allowed(c, acl.OpDescribe, acl.ResourceTopic, topic) {
		return errUnknownTopicID
	}
	return codeTopicAuthz
}

// authzFetch: a consumer needs TOPIC READ per topic; a replica (ReplicaID
// >= 0) needs CLUSTER CLUSTER_ACTION, without which every partition is
// TOPIC_AUTHORIZATION_FAILED (KafkaApis.handleFetchRequest).
func (s *Server) authzFetch(c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.FetchRequest)
	gate := s.topicAuthzGate(c, r.key, acl.OpRead)
	if isFollowerFetch(req) {
		gate = s.refuseAllGate(c)
		if s.authorize(c, r.key, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
			gate = nil
		}
	}
	return s.fetch(req, gate)
}

// authzListOffsets: TOPIC DESCRIBE per topic.
func (s *Server) authzListOffsets(c Client, r *request) kmsg.Response {
	return s.listOffsets(r.req.(*kmsg.ListOffsetsRequest), s.topicAuthzGate(c, r.key, acl.OpDescribe))
}

// authzOffsetForLeaderEpoch: CLUSTER CLUSTER_ACTION (a replica's right,
// checked silently) allows every topic; otherwise TOPIC DESCRIBE per topic,
// the right KIP-320 gives consumers.
func (s *Server) authzOffsetForLeaderEpoch(c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.OffsetForLeaderEpochRequest)
	if s.allowed(c, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
		return s.offsetForLeaderEpoch(req, nil)
	}
	return s.offsetForLeaderEpoch(req, s.topicAuthzGate(c, r.key, acl.OpDescribe))
}

// authzProduce: a transactional produce needs TRANSACTIONAL_ID WRITE
// (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED without it), then
// TOPIC WRITE per topic. cohort does not read the records, so the
// transactional ID field stands for Kafka's "has transactional records",
// and the idempotent-write check Kafka 3+ makes only when no topic is
// writable is left out: every partition is refused anyway.
func (s *Server) authzProduce(c Client, r *request) kmsg.Response {
	req := r.req.(*kmsg.ProduceRequest)
	if req.TransactionID != nil && !s.authorize(c, r.key, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID) {
		return s.produceAnswer(req, nil, codeTxnIDAuthz)
	}
	return s.produceAnswer(req, s.topicAuthzGate(c, r.key, acl.OpWrite), errNone)
}
