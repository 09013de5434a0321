package testbed

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// KIP-848 through the router. The consumer group protocol names topics by
// id in both directions: a member lists what it owns by the ids it read in
// Metadata (kfake's, through the router), and the coordinator answers
// assignments by its own ids (cohort derives an id from each name). The
// router learns kfake's ids from the Metadata answers it passes on and
// rewrites ConsumerGroupHeartbeat requests (owned partitions, kfake → cohort)
// and answers (assignment, cohort → kfake), and ConsumerGroupDescribe answers
// (each member's assignment and target). cohort must know the topics too:
// Start creates them in both servers. docs/compatibility.md.

// topicIDs maps topic ids between kfake and cohort through topic names.
type topicIDs struct {
	mu        sync.Mutex
	kfakeName map[[16]byte]string // kfake id -> name
	kfakeID   map[string][16]byte // name -> kfake id
	// refresh asks the data cluster for all its topics (a client may get
	// an assignment before the router saw its topic in a Metadata answer
	// with ids: librdkafka asks for Metadata by name at versions without).
	refresh func() error
}

// fetch learns every topic of the data cluster at addr (Metadata v12).
func (t *topicIDs) fetch(addr string) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp, err := roundTrip(addr, req)
	if err != nil {
		return err
	}
	t.learn(resp)
	return nil
}

// learn records the names and kfake ids of a Metadata answer.
func (t *topicIDs) learn(resp kmsg.Response) {
	m, ok := resp.(*kmsg.MetadataResponse)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kfakeName == nil {
		t.kfakeName, t.kfakeID = map[[16]byte]string{}, map[string][16]byte{}
	}
	for _, tp := range m.Topics {
		if tp.Topic == nil || tp.TopicID == ([16]byte{}) || tp.ErrorCode != 0 {
			continue
		}
		t.kfakeName[tp.TopicID] = *tp.Topic
		t.kfakeID[*tp.Topic] = tp.TopicID
	}
}

// toCohort is cohort's id of the topic kfake calls id.
func (t *topicIDs) toCohort(id [16]byte) ([16]byte, error) {
	for try := 0; ; try++ {
		t.mu.Lock()
		name, ok := t.kfakeName[id]
		t.mu.Unlock()
		if ok {
			return catalog.TopicID(name), nil
		}
		if try > 0 || !t.refreshed() {
			return id, fmt.Errorf("router: kfake's topic id %x names no topic of the data cluster", id)
		}
	}
}

// toKfake is kfake's id of the topic cohort calls id.
func (t *topicIDs) toKfake(id [16]byte) ([16]byte, error) {
	for try := 0; ; try++ {
		t.mu.Lock()
		for name, kid := range t.kfakeID {
			if catalog.TopicID(name) == id {
				t.mu.Unlock()
				return kid, nil
			}
		}
		t.mu.Unlock()
		if try > 0 || !t.refreshed() {
			return id, fmt.Errorf("router: cohort's topic id %x names no topic of the data cluster", id)
		}
	}
}

// refreshed refreshes the map from the data cluster, if it can.
func (t *topicIDs) refreshed() bool {
	return t.refresh != nil && t.refresh() == nil
}

// serveKIP848 forwards a ConsumerGroupHeartbeat or ConsumerGroupDescribe to
// cohort with its topic ids translated both ways.
func (c *rconn) serveKIP848(h header, f []byte) ([]byte, error) {
	req, err := decodeRequest(h, f)
	if err != nil {
		return nil, err
	}
	ids := &c.r.ids
	if q, ok := req.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
		for i := range q.Topics {
			if q.Topics[i].TopicID, err = ids.toCohort(q.Topics[i].TopicID); err != nil {
				return nil, err
			}
		}
		f = req.AppendTo(append([]byte(nil), f[:h.bodyAt]...))
	}
	resp, err := c.forwardDecoded(true, req, f)
	if err != nil {
		return nil, err
	}
	switch r := resp.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		if r.Assignment != nil {
			for i := range r.Assignment.Topics {
				if r.Assignment.Topics[i].TopicID, err = ids.toKfake(r.Assignment.Topics[i].TopicID); err != nil {
					return nil, err
				}
			}
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for gi := range r.Groups {
			for mi := range r.Groups[gi].Members {
				m := &r.Groups[gi].Members[mi]
				for _, a := range []*kmsg.Assignment{&m.Assignment, &m.TargetAssignment} {
					for i := range a.TopicPartitions {
						if a.TopicPartitions[i].TopicID, err = ids.toKfake(a.TopicPartitions[i].TopicID); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	default:
		return nil, errors.New("router: not a KIP-848 answer")
	}
	return encodeResponse(h.corr, resp), nil
}
