package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
)

const adminPassword = "admin-secret-1"

// startNode runs a node on loopback with the console on its HTTP listener;
// secure adds a SASL_PLAINTEXT listener, SCRAM and a super user "admin".
func startNode(t testing.TB, secure bool, adjust ...func(*node.Config)) *node.Node {
	t.Helper()
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	gcfg.MinSessionTimeout = 500 * time.Millisecond
	cfg := node.Config{
		Listen:       "127.0.0.1:0",
		Store:        memstore.New(),
		Group:        gcfg,
		HTTPListen:   "127.0.0.1:0",
		HTTPHandlers: Register,
		ClusterID:    "console-test",
		Logger:       slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if secure {
		cfg.Listen = ""
		cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
		cfg.Security = &node.SecurityConfig{
			Mechanisms:        []string{sasl.ScramSHA256, sasl.ScramSHA512},
			BootstrapUser:     "admin",
			BootstrapPassword: adminPassword,
			SuperUsers:        []string{"User:admin"},
			FailedAuthDelay:   time.Millisecond,
		}
	}
	for _, f := range adjust {
		f(&cfg)
	}
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// kafkaClient is a client of n (as admin when the node is secure).
func kafkaClient(t testing.TB, n *node.Node, secure bool, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(n.Addr())}, opts...)
	if secure {
		opts = append(opts, kgo.SASL(scram.Auth{User: "admin", Pass: adminPassword}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// commit creates topic (partitions) and commits offsets for group on it.
func commit(ctx context.Context, t testing.TB, adm *kadm.Client, grp, topic string, partitions int32) {
	t.Helper()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
	var os kadm.Offsets
	for p := int32(0); p < partitions; p++ {
		os.AddOffset(topic, p, int64(100+p), -1)
	}
	// A retriable error is retried, as clients do: on a cluster of nodes
	// a partition's coordinator may be moving (an etcd session renewed
	// late on a busy machine) or not know the new topic yet.
	var last error
	if !testwait.Until(20*time.Second, func() bool {
		res, err := adm.CommitOffsets(ctx, grp, os)
		if err == nil {
			err = res.Error()
		}
		if err != nil && !kerr.IsRetriable(err) {
			t.Fatalf("CommitOffsets: %v", err)
		}
		last = err
		return err == nil
	}) {
		t.Fatalf("CommitOffsets: still %v after 20 s", last)
	}
}

// get fetches url with optional basic credentials; it returns the status
// and body.
func get(t testing.TB, url, user, pass string) (int, string) {
	t.Helper()
	code, body, err := getErr(url, user, pass)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// getErr is get for a goroutine other than the test's: it returns the
// failure instead of failing the test.
func getErr(url, user, pass string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	cl := &http.Client{Timeout: 20 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// nodeWithGroup starts a node without authentication on which group has
// committed offsets on topic (partitions); it returns the node and the
// console's base URL.
func nodeWithGroup(t testing.TB, grp, topic string, partitions int32) (*node.Node, string) {
	t.Helper()
	n := startNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commit(ctx, t, kadm.NewClient(kafkaClient(t, n, false)), grp, topic, partitions)
	return n, "http://" + n.HTTPAddr() + "/console/"
}

// handConsumers drives the members of one consumer-protocol group by hand:
// each heartbeat reports the partitions the member was last assigned, so
// the member takes whatever it is given.
type handConsumers struct {
	ctx        context.Context
	t          *testing.T
	cl         *kgo.Client
	grp, topic string
	ids        []string
	st         map[string]*handConsumer
}

type handConsumer struct {
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func newHandConsumers(ctx context.Context, t *testing.T, cl *kgo.Client, grp, topic string) *handConsumers {
	return &handConsumers{ctx: ctx, t: t, cl: cl, grp: grp, topic: topic, st: map[string]*handConsumer{}}
}

// join sends member id's first heartbeat.
func (g *handConsumers) join(id string) {
	g.t.Helper()
	g.ids = append(g.ids, id)
	g.st[id] = &handConsumer{}
	g.beat(id)
}

// beat sends one heartbeat of member id and reports whether its epoch or
// assignment changed.
func (g *handConsumers) beat(id string) bool {
	g.t.Helper()
	s := g.st[id]
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = g.grp, id, s.epoch, 60000
	hb.SubscribedTopicNames, hb.Topics = []string{g.topic}, s.owned
	if hb.Topics == nil {
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	resp, err := hb.RequestWith(g.ctx, g.cl)
	if err != nil || resp.ErrorCode != 0 {
		g.t.Fatalf("ConsumerGroupHeartbeat of %s: %v %+v", id, err, resp)
	}
	before := fmt.Sprint(s.epoch, s.owned)
	s.epoch = resp.MemberEpoch
	if a := resp.Assignment; a != nil {
		s.owned = s.owned[:0:0]
		for _, tp := range a.Topics {
			s.owned = append(s.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
	}
	return fmt.Sprint(s.epoch, s.owned) != before
}

// converge sends rounds of heartbeats of every member until one changes
// nothing.
func (g *handConsumers) converge() {
	g.t.Helper()
	for round := 0; ; round++ {
		if round == 50 {
			g.t.Fatalf("group %s did not converge with %d members", g.grp, len(g.ids))
		}
		changed := false
		for _, id := range g.ids {
			changed = g.beat(id) || changed
		}
		if !changed {
			return
		}
	}
}
