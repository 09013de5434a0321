package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
)

// secTarget is an address clients reach and how they connect to it.
type secTarget struct {
	name string
	addr string
	tls  *tls.Config // nil: no TLS
	user string      // "": no SASL
	pass string
}

const (
	benchUser  = "bench"
	benchPass  = "bench-password"
	benchAdmin = "admin"
)

// dialSecure opens a raw connection to tg: TLS if configured, ApiVersions,
// then a SCRAM-SHA-512 login with client (whose derived keys are cached, so
// the load generator spends little per login).
func dialSecure(ctx context.Context, tg secTarget, client *xscram.Client) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", tg.addr)
	if err != nil {
		return nil, err
	}
	if tg.tls != nil {
		cfg := tg.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(tg.addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	c := &rawConn{nc: nc, rd: bufio.NewReaderSize(nc, 16<<10), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench-sec")), max: map[int16]int16{}}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	avr := kmsg.NewPtrApiVersionsResponse()
	if err := c.do(ctx, av, avr); err != nil {
		nc.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range avr.ApiKeys {
		c.max[k.ApiKey] = k.MaxVersion
	}
	if tg.user != "" {
		if err := c.scramLogin(ctx, client); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

// scramLogin runs SaslHandshake v1 and the SCRAM-SHA-512 exchange.
func (c *rawConn) scramLogin(ctx context.Context, client *xscram.Client) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = sasl.ScramSHA512
	hsr := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.do(ctx, hs, hsr); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if hsr.ErrorCode != 0 {
		return fmt.Errorf("SaslHandshake: %w", kerr.ErrorForCode(hsr.ErrorCode))
	}
	conv := client.NewConversation()
	msg, err := conv.Step("")
	for !conv.Done() {
		if err != nil {
			return err
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = min(c.max[36], 2)
		req.SASLAuthBytes = []byte(msg)
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.do(ctx, req, resp); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if resp.ErrorCode != 0 {
			return fmt.Errorf("SaslAuthenticate: %w", kerr.ErrorForCode(resp.ErrorCode))
		}
		msg, err = conv.Step(string(resp.SASLAuthBytes))
	}
	if err != nil {
		return err
	}
	if !conv.Valid() {
		return errors.New("SCRAM: the server's signature did not verify")
	}
	return nil
}

// startSecureCohort starts cohort (memstore) with PLAINTEXT and SASL_SSL
// listeners and ACLs: the bench user may READ groups and topics prefixed
// "bench-", and so may User:ANONYMOUS (the PLAINTEXT listener), so both
// paths pay the same authorization.
func startSecureCohort(t *testing.T, ca *testpki.CA) (plain, secure secTarget, stop func()) {
	pair := ca.Server(t, "cohort")
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(node.Config{
		Listeners: []server.Listener{
			{Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"},
			{Protocol: server.ProtocolSASLSSL, Addr: "127.0.0.1:0"},
		},
		Store:  memstore.New(),
		Group:  cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Security: &node.SecurityConfig{
			TLS:               srvTLS,
			Mechanisms:        []string{sasl.ScramSHA512},
			BootstrapUser:     benchAdmin,
			BootstrapPassword: benchPass,
			SuperUsers:        []string{"User:" + benchAdmin},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		n.Close()
		t.Fatal(err)
	}
	secure = secTarget{name: "cohort SASL_SSL", addr: n.ListenerAddr(server.ProtocolSASLSSL), tls: ca.ClientConfig(nil), user: benchUser, pass: benchPass}
	plain = secTarget{name: "cohort PLAINTEXT", addr: n.ListenerAddr(server.ProtocolPlaintext)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(secure.addr), kgo.DialTLSConfig(secure.tls),
		kgo.SASL(scram.Auth{User: benchAdmin, Pass: benchPass}.AsSha512Mechanism()))
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: benchUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: benchPass}}); err != nil || r.Error() != nil {
		n.Close()
		t.Fatalf("creating the bench user: %v %v", err, r.Error())
	}
	acls := kadm.NewACLs().Allow("User:"+benchUser, "User:ANONYMOUS").ResourcePatternType(kadm.ACLPatternPrefixed).
		Groups("bench-").Topics("bench-").Operations(kadm.OpRead)
	if r, err := adm.CreateACLs(ctx, acls); err != nil {
		n.Close()
		t.Fatal(err)
	} else {
		for _, x := range r {
			if x.Err != nil {
				n.Close()
				t.Fatalf("CreateACLs: %v", x.Err)
			}
		}
	}
	return plain, secure, func() { n.Close() }
}

// startSASLKfake starts kfake with SASL (SCRAM-SHA-512 super user bench)
// over TLS.
func startSASLKfake(t *testing.T, ca *testpki.CA) (secTarget, func()) {
	pair := ca.Server(t, "kfake")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(sasl.ScramSHA512, benchUser, benchPass),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair.TLS}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	return secTarget{name: "kfake SASL_SSL", addr: c.ListenAddrs()[0], tls: ca.ClientConfig(nil), user: benchUser, pass: benchPass}, c.Close
}

// connectCase measures new authenticated connections per second: dial,
// TLS, ApiVersions, SCRAM-SHA-512, close.
func connectCase(ctx context.Context, tg secTarget, workers int, window time.Duration) (Throughput, error) {
	clients := make([]*xscram.Client, workers)
	for i := range clients {
		c, err := xscram.SHA512.NewClient(tg.user, tg.pass, "")
		if err != nil {
			return Throughput{}, err
		}
		clients[i] = c
	}
	return load(ctx, workers, window, func(ctx context.Context, w int) (bool, error) {
		c, err := dialSecure(ctx, tg, clients[w])
		if err != nil {
			return false, err
		}
		c.Close()
		return true, nil
	})
}

// secureMember is one member of its own group, joined over tg.
type secureMember struct {
	c        *rawConn
	group    string
	memberID string
	gen      int32
}

func joinAlone(ctx context.Context, tg secTarget, client *xscram.Client, grp string) (*secureMember, error) {
	c, err := dialSecure(ctx, tg, client)
	if err != nil {
		return nil, err
	}
	m := &secureMember{c: c, group: grp}
	for range 3 {
		jr := kmsg.NewPtrJoinGroupRequest()
		jr.Version = 5
		jr.Group, jr.MemberID, jr.ProtocolType = grp, m.memberID, "bench"
		jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = 30000, 30000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "p"
		jr.Protocols = append(jr.Protocols, p)
		resp := kmsg.NewPtrJoinGroupResponse()
		if err := c.do(ctx, jr, resp); err != nil {
			return nil, err
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			m.memberID = resp.MemberID
			continue
		}
		if resp.ErrorCode != 0 {
			return nil, fmt.Errorf("JoinGroup %s: %w", grp, kerr.ErrorForCode(resp.ErrorCode))
		}
		m.memberID, m.gen = resp.MemberID, resp.Generation
		sr := kmsg.NewPtrSyncGroupRequest()
		sr.Version = 3
		sr.Group, sr.MemberID, sr.Generation = grp, m.memberID, m.gen
		sresp := kmsg.NewPtrSyncGroupResponse()
		if err := c.do(ctx, sr, sresp); err != nil {
			return nil, err
		}
		if sresp.ErrorCode != 0 {
			return nil, fmt.Errorf("SyncGroup %s: %w", grp, kerr.ErrorForCode(sresp.ErrorCode))
		}
		return m, nil
	}
	return nil, fmt.Errorf("JoinGroup %s: no member id", grp)
}

// heartbeatSecure measures heartbeats per second of workers members, each
// alone in its group, each on its own connection.
func heartbeatSecure(ctx context.Context, tg secTarget, workers int, window time.Duration, tag string) (Throughput, error) {
	ms := make([]*secureMember, workers)
	for i := range ms {
		cl, _ := xscram.SHA512.NewClient(tg.user, tg.pass, "")
		m, err := joinAlone(ctx, tg, cl, fmt.Sprintf("bench-hb-%s-%d", tag, i))
		if err != nil {
			return Throughput{}, err
		}
		defer m.c.Close()
		ms[i] = m
	}
	return load(ctx, workers, window, func(ctx context.Context, w int) (bool, error) {
		m := ms[w]
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 3
		req.Group, req.MemberID, req.Generation = m.group, m.memberID, m.gen
		resp := kmsg.NewPtrHeartbeatResponse()
		if err := m.c.do(ctx, req, resp); err != nil {
			return false, err
		}
		return resp.ErrorCode == 0, nil
	})
}

// commitSecure measures OffsetCommits per second (one partition each, no
// generation) of workers connections, each committing for its own group.
func commitSecure(ctx context.Context, tg secTarget, workers int, window time.Duration, tag string) (Throughput, error) {
	conns := make([]*rawConn, workers)
	for i := range conns {
		cl, _ := xscram.SHA512.NewClient(tg.user, tg.pass, "")
		c, err := dialSecure(ctx, tg, cl)
		if err != nil {
			return Throughput{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	offsets := make([]int64, workers)
	return load(ctx, workers, window, func(ctx context.Context, w int) (bool, error) {
		offsets[w]++
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 8
		req.Group, req.Generation = fmt.Sprintf("bench-c-%s-%d", tag, w), -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "bench-t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = offsets[w]
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrOffsetCommitResponse()
		if err := conns[w].do(ctx, req, resp); err != nil {
			return false, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return false, errors.New("OffsetCommit: malformed answer")
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			return false, fmt.Errorf("OffsetCommit: %w", kerr.ErrorForCode(code))
		}
		return true, nil
	})
}

// TestSecurityCompare measures what security costs (issue 13): heartbeats
// and commits per second over SASL_SSL (SCRAM-SHA-512, TLS 1.3, ACLs)
// against PLAINTEXT on the same node (which checks ACLs too: the
// authorizer is node-wide) and against a node without any security, and
// new authenticated connections per
// second against kfake with SASL over TLS, in alternating order, over
// COHORT_BENCH_REPEAT series (default 3) of COHORT_BENCH_SECONDS windows
// (default 1). Without COHORT_BENCH=1 it is a quick sanity run. It logs a
// markdown table of medians and per-series ratios; nothing is asserted
// beyond every request succeeding.
//
//	COHORT_BENCH=1 COHORT_BENCH_REPEAT=5 COHORT_BENCH_SECONDS=2 go test -run TestSecurityCompare -v -timeout 20m ./bench/
func TestSecurityCompare(t *testing.T) {
	testwait.WallClock(t, "benchmark: cohort and its peer measured side by side")
	quick := testing.Short() || os.Getenv("COHORT_BENCH") != "1"
	window, repeat, workers := time.Second, 3, 16
	if quick {
		window, repeat = 200*time.Millisecond, 1
	}
	if v := os.Getenv("COHORT_BENCH_SECONDS"); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s < 1 || s > 60 {
			t.Fatalf("COHORT_BENCH_SECONDS=%q", v)
		}
		window = time.Duration(s) * time.Second
	}
	if v := os.Getenv("COHORT_BENCH_REPEAT"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 || r > 50 {
			t.Fatalf("COHORT_BENCH_REPEAT=%q", v)
		}
		repeat = r
	}
	ca := testpki.NewCA(t, "bench-ca")
	plain, secure, stop := startSecureCohort(t, ca)
	defer stop()
	// The same coordinator with no security at all (no authorizer): what
	// cohort costs today on loopback.
	bareAddr, stopBare := startCohort(t, memStore)
	defer stopBare()
	bare := secTarget{name: "cohort bare", addr: bareAddr}
	kf, stopKf := startSASLKfake(t, ca)
	defer stopKf()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	type row struct {
		name string
		a, b secTarget
		run  func(ctx context.Context, tg secTarget, series int) (Throughput, error)
	}
	rows := []row{
		{"heartbeats/s", secure, plain, func(ctx context.Context, tg secTarget, s int) (Throughput, error) {
			return heartbeatSecure(ctx, tg, workers, window, fmt.Sprintf("%s-%d", strings.Fields(tg.name)[1], s))
		}},
		{"commits/s", secure, plain, func(ctx context.Context, tg secTarget, s int) (Throughput, error) {
			return commitSecure(ctx, tg, workers, window, fmt.Sprintf("%s-%d", strings.Fields(tg.name)[1], s))
		}},
		{"heartbeats/s", secure, bare, func(ctx context.Context, tg secTarget, s int) (Throughput, error) {
			return heartbeatSecure(ctx, tg, workers, window, fmt.Sprintf("%s-x%d", strings.Fields(tg.name)[1], s))
		}},
		{"commits/s", secure, bare, func(ctx context.Context, tg secTarget, s int) (Throughput, error) {
			return commitSecure(ctx, tg, workers, window, fmt.Sprintf("%s-x%d", strings.Fields(tg.name)[1], s))
		}},
		{"new authenticated connections/s", secure, kf, func(ctx context.Context, tg secTarget, s int) (Throughput, error) {
			return connectCase(ctx, tg, 4, window)
		}},
	}
	var md strings.Builder
	fmt.Fprintf(&md, "| case | A | B | A median | B median | A/B per series | A/B median |\n|---|---|---|---:|---:|---|---:|\n")
	for _, r := range rows {
		var as, bs, ratios []float64
		for s := range repeat {
			order := []secTarget{r.a, r.b}
			if s%2 == 1 {
				order = []secTarget{r.b, r.a}
			}
			got := map[string]float64{}
			for _, tg := range order {
				th, err := r.run(ctx, tg, s)
				if err != nil {
					t.Fatalf("%s on %s: %v", r.name, tg.name, err)
				}
				switch {
				case th.Done == 0:
					t.Fatalf("%s on %s: nothing succeeded", r.name, tg.name)
				case th.OK == 0 && !quick:
					t.Fatalf("%s on %s: nothing succeeded within the %v window (%d outside it)", r.name, tg.name, window, th.Done)
				case th.OK == 0:
					// The quick run checks that the path works; on a
					// loaded machine a handshake can outlast its window.
					t.Logf("%s on %s: none fitted in the %v window, %d succeeded around it", r.name, tg.name, window, th.Done)
				}
				got[tg.name] = th.PerSec()
				t.Logf("series %d %s %s: %.0f/s (p50 %v, p99 %v, CPU/op %v)", s, r.name, tg.name, th.PerSec(), th.P50, th.P99, th.CPUPerOp())
			}
			as, bs = append(as, got[r.a.name]), append(bs, got[r.b.name])
			ratios = append(ratios, got[r.a.name]/got[r.b.name])
		}
		rs := make([]string, len(ratios))
		for i, x := range ratios {
			rs[i] = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(&md, "| %s | %s | %s | %.0f | %.0f | %s | %.2f |\n", r.name, r.a.name, r.b.name, median(as), median(bs), strings.Join(rs, " "), median(ratios))
	}
	t.Logf("security cost, %d workers (4 for connections), %v windows, %d series:\n%s", workers, window, repeat, md.String())
}
