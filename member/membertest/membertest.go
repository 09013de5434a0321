// Package membertest starts the coordinators that the tests of member and of
// the recipes run against: an in-process cohort node and franz-go's fake
// Kafka cluster (kfake), both on 127.0.0.1 with short minimum session
// timeouts, plus fault injection (a TCP proxy that can cut the coordinator
// off, and a request filter that can hold back chosen requests).
package membertest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// MinSessionTimeout is the minimum session timeout both test coordinators
// accept, so that tests can use sub-second sessions.
const MinSessionTimeout = 100 * time.Millisecond

// Logger returns a logger that writes warnings and errors to t.Log (to
// stderr, naming t, once t has ended).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// CohortConfig is the node configuration used by StartCohort: memstore (or
// st), no initial rebalance delay, MinSessionTimeout.
func CohortConfig(t testing.TB, listen string, st store.Store) node.Config {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.MinSessionTimeout = MinSessionTimeout
	return node.Config{
		Listen:    listen,
		Store:     st,
		Group:     cfg,
		Logger:    Logger(t),
		ClusterID: "membertest",
	}
}

// StartCohort starts a cohort node on 127.0.0.1 and stops it when the test
// ends. A nil store means a fresh memstore.
func StartCohort(t testing.TB, st store.Store) *node.Node {
	t.Helper()
	if st == nil {
		st = memstore.New()
	}
	return StartNode(t, CohortConfig(t, "127.0.0.1:0", st))
}

// StartNode starts a node with cfg, waits until it has loaded, and closes it
// when the test ends (closing twice is harmless).
func StartNode(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { n.Close() }) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// StartKfake starts franz-go's fake cluster with one broker on 127.0.0.1 and
// returns its address.
func StartKfake(t testing.TB, opts ...kfake.Opt) string {
	t.Helper()
	base := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(MinSessionTimeout),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
	}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// Client returns a kgo client for addr, closed when the test ends.
func Client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RetryBackoffFn(func(tries int) time.Duration { return min(20*time.Millisecond<<min(tries, 4), 300*time.Millisecond) }),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Requester is the request interface of member.Requester (repeated here so
// that this package does not import member).
type Requester interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// ErrBlocked is returned for requests a Filter holds back.
var ErrBlocked = errors.New("membertest: request blocked")

// Filter wraps a Requester and fails the requests that Block selects, as if
// the network had dropped them. It simulates a paused process (block its
// heartbeats) or a partition.
type Filter struct {
	R     Requester
	mu    sync.Mutex
	block func(kmsg.Request) bool
}

// SetBlock installs the predicate (nil: let everything through).
func (f *Filter) SetBlock(fn func(kmsg.Request) bool) {
	f.mu.Lock()
	f.block = fn
	f.mu.Unlock()
}

// Request implements Requester.
func (f *Filter) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	b := f.block
	f.mu.Unlock()
	if b != nil && b(req) {
		return nil, ErrBlocked
	}
	return f.R.Request(ctx, req)
}

// Heartbeats selects Heartbeat requests.
func Heartbeats(req kmsg.Request) bool { _, ok := req.(*kmsg.HeartbeatRequest); return ok }

// All selects every request.
func All(kmsg.Request) bool { return true }

// Proxy forwards TCP connections to a target. Cut closes every forwarded
// connection and refuses new ones (by closing them at once) until Restore,
// which makes the target unreachable the way a network partition would.
type Proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewProxy listens on 127.0.0.1:0; set the target with SetTarget.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets where new connections go.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// Cut drops every connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target, cut := p.target, p.cut
		p.mu.Unlock()
		if cut || target == "" {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// AdminPassword is the password of SecureCohort's super user admin.
const AdminPassword = "admin-secret-1"

// SecureCohort starts a cohort node with a SASL_PLAINTEXT listener on
// 127.0.0.1, SCRAM-SHA-512 and ACLs enforced, the super user admin
// (AdminPassword) and the user user with password, whom no ACL grants
// anything yet. It returns the node and an admin client.
func SecureCohort(t testing.TB, user, password string) (*node.Node, *kadm.Client) {
	t.Helper()
	cfg := CohortConfig(t, "", memstore.New())
	cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
	cfg.Security = &node.SecurityConfig{Mechanisms: []string{sasl.ScramSHA512}, BootstrapUser: "admin",
		BootstrapPassword: AdminPassword, SuperUsers: []string{"User:admin"}, FailedAuthDelay: time.Millisecond}
	n := StartNode(t, cfg)
	adm := kadm.NewClient(Client(t, n.Addr(), kgo.SASL(scram.Auth{User: "admin", Pass: AdminPassword}.AsSha512Mechanism())))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	return n, adm
}
