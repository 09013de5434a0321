package clients

// Issue 13, "How it must be shown": stock Kafka clients authenticate against
// cohort unchanged. Each test starts its own secure node (testbed.Secure:
// SASL_SSL with SCRAM-SHA-256/512, PLAIN and OAUTHBEARER, SSL requiring a
// client certificate, the user "app" allowed READ/DESCRIBE on the groups
// "sec-*" and the topic "t", ACLs created over the wire by the super user),
// so that the node's authentication counters belong to one client. Every
// client connects directly to the node with CA-verified TLS and uses only the
// group and admin APIs (cohort serves no records), then:
//
//   - does its group work as "app" over SCRAM-SHA-512;
//   - runs again with a wrong password, left running for failWindow: it must
//     report an authentication error, get no group data, and cost cohort only
//     a bounded number of failed authentications (no retry storm);
//   - is refused a group outside "sec-*" (GROUP_AUTHORIZATION_FAILED).
//
// The wrong-password run overlaps the good one so that the window costs no
// extra time: only the wrong client can fail an authentication.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	ckafka "github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/segmentio/kafka-go"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
)

const (
	// failWindow is how long a wrong-password client is left running
	// before its failed authentications are counted.
	failWindow = 5 * time.Second
	scram512   = "SCRAM-SHA-512"
	// secTimeout bounds each test.
	secTimeout = 45 * time.Second
)

// failureWindow counts the failed authentications of one mechanism from its
// start until its end (at least failWindow later).
type failureWindow struct {
	s         *testbed.Secure
	mechanism string
	before    int
	end       time.Time
}

func startFailureWindow(t *testing.T, s *testbed.Secure, mechanism string) *failureWindow {
	return &failureWindow{s: s, mechanism: mechanism, before: s.AuthFailures(t, mechanism), end: time.Now().Add(failWindow)}
}

// wait returns when the window is over (or ctx is done).
func (w *failureWindow) wait(ctx context.Context) {
	tm := time.NewTimer(time.Until(w.end))
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// check waits for the window's end and asserts 1 <= failures <= most: the
// client tried (and cohort counted it) but did not storm.
func (w *failureWindow) check(ctx context.Context, t *testing.T, client string, most int) {
	t.Helper()
	w.wait(ctx)
	n := w.s.AuthFailures(t, w.mechanism) - w.before
	t.Logf("%s with a wrong password: %d failed %s authentications in %v", client, n, w.mechanism, failWindow)
	if n < 1 || n > most {
		t.Errorf("%s with a wrong password: %d failed authentications in %v, want 1..%d", client, n, failWindow, most)
	}
}

// startSecure starts a secure bed for a parallel test and returns it with a
// context bounding the test (secTimeout).
func startSecure(t *testing.T) (*testbed.Secure, context.Context) {
	t.Parallel()
	s := testbed.StartSecure(t)
	ctx, cancel := context.WithTimeout(context.Background(), secTimeout)
	t.Cleanup(cancel)
	return s, ctx
}

func appSCRAM(s *testbed.Secure, wrong bool) kgosasl.Mechanism {
	return scram.Auth{User: testbed.AppUser, Pass: s.AppPassword(wrong)}.AsSha512Mechanism()
}

// describeErr describes one group with kadm and returns its error. A group
// the principal may not DESCRIBE fails already at FindCoordinator (Kafka
// answers it GROUP_AUTHORIZATION_FAILED), which kadm reports as a shard
// error rather than in the group's result; both are unwrapped here.
func describeErr(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && len(se.Errs) > 0 {
		return se.Errs[0].Err
	}
	if err != nil {
		return err
	}
	return described[group].Err
}

// startSecMember runs a member (cohort's member package) of group on cl
// with short timeouts, closed by t.Cleanup; assigned receives the first
// generation.
func startSecMember(t *testing.T, cl *kgo.Client, group string, assigned chan<- member.Generation) *member.Member {
	t.Helper()
	m, err := member.Start(member.Config{
		Client:       cl,
		Group:        group,
		ProtocolType: "sec-test",
		Protocols:    func() []member.Protocol { return []member.Protocol{{Name: "v1", Metadata: []byte("m")}} },
		Assign: func(_ context.Context, g member.Generation) (map[string][]byte, error) {
			out := map[string][]byte{}
			for _, mm := range g.Members {
				out[mm.ID] = []byte("work")
			}
			return out, nil
		},
		Assigned: func(_ context.Context, g member.Generation) {
			select {
			case assigned <- g:
			default:
			}
		},
		SessionTimeout:    3 * time.Second,
		HeartbeatInterval: 300 * time.Millisecond,
		RebalanceTimeout:  5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Before t.Cleanup closes cl (cleanups run last first).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	return m
}

// TestSecurityFranzGo: franz-go (kgo, kadm, pkg/sasl/scram, plain and oauth)
// over SASL_SSL.
func TestSecurityFranzGo(t *testing.T) {
	s, ctx := startSecure(t)

	// The wrong password, left running: a member of cohort's member package
	// retrying its join with backoff (100 ms doubling to 2 s), on a kgo
	// client whose every connection fails SASL. kgo reports
	// SASL_AUTHENTICATION_FAILED (kerr.SaslAuthenticationFailed) and does not
	// retry it itself.
	window := startFailureWindow(t, s, scram512)
	bad := s.Client(t, appSCRAM(s, true))
	if _, err := kadm.NewClient(bad).ListGroups(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("kadm ListGroups with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	badAssigned := make(chan member.Generation, 1)
	startSecMember(t, bad, testbed.AppGroupPrefix+"kgo-wrong", badAssigned)

	cl := s.Client(t, appSCRAM(s, false))
	adm := kadm.NewClient(cl)
	assigned := make(chan member.Generation, 1)
	m := startSecMember(t, cl, testbed.AppGroupPrefix+"kgo", assigned)
	var gen member.Generation
	select {
	case gen = <-assigned:
	case <-ctx.Done():
		t.Fatal("the SCRAM-SHA-512 member was never assigned")
	}
	if string(gen.Assignment) != "work" || !gen.Leader {
		t.Fatalf("generation %+v: want the leader, assigned \"work\"", gen)
	}
	// Hold the membership over 6 heartbeats (about 2 s at 300 ms; only
	// this member heartbeats on this node): the generation stays.
	heartbeats := func() int {
		return s.Counter(t, "cohort_server_requests_total", map[string]string{"api": "Heartbeat"})
	}
	hbBefore := heartbeats()
	hbCtx, hbCancel := context.WithTimeout(ctx, 10*time.Second)
	defer hbCancel()
	if err := testbed.WaitFor(hbCtx, "6 heartbeats", func() bool { return heartbeats()-hbBefore >= 6 }); err != nil {
		t.Fatal(err)
	}
	if now, stable := m.Generation(); !stable || now.ID != gen.ID {
		t.Errorf("after 6 heartbeats: generation %d (stable %v), want %d stable", now.ID, stable, gen.ID)
	}
	// Commit in the member's generation, as a consumer does, and fetch.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation, commit.MemberID = testbed.AppGroupPrefix+"kgo", gen.ID, gen.MemberID
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = testbed.AppTopic
	ct.TopicID = catalog.TopicID(testbed.AppTopic) // v10 names the topic by its ID, as Metadata gives it
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 5
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetCommit: %v", err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit: %v", kerr.ErrorForCode(code))
	}
	fetched, err := adm.FetchOffsets(ctx, testbed.AppGroupPrefix+"kgo")
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	if o, _ := fetched.Lookup(testbed.AppTopic, 0); o.At != 5 {
		t.Errorf("FetchOffsets: t/0 at %d, want 5", o.At)
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if _, ok := listed[testbed.AppGroupPrefix+"kgo"]; !ok {
		t.Errorf("ListGroups: sec-kgo missing from %v", listed.Groups())
	}
	// Authorization: ListGroups lists only the groups "app" may DESCRIBE,
	// and describing another group is GROUP_AUTHORIZATION_FAILED.
	if _, ok := listed[testbed.OtherGroup]; ok {
		t.Errorf("ListGroups as app lists %s, which app may not describe", testbed.OtherGroup)
	}
	described, err := adm.DescribeGroups(ctx, testbed.AppGroupPrefix+"kgo")
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	if g := described[testbed.AppGroupPrefix+"kgo"]; g.Err != nil || g.State != "Stable" || len(g.Members) != 1 || g.ProtocolType != "sec-test" {
		t.Errorf("DescribeGroups sec-kgo: err %v state %q members %d type %q", g.Err, g.State, len(g.Members), g.ProtocolType)
	}
	if err := describeErr(ctx, adm, testbed.OtherGroup); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("DescribeGroups %s as app: %v, want GROUP_AUTHORIZATION_FAILED", testbed.OtherGroup, err)
	}

	// PLAIN checks the SCRAM user's password; OAUTHBEARER takes the
	// principal from the token's sub.
	for _, tc := range []struct {
		name      string
		mech      kgosasl.Mechanism
		mechanism string
		wantErr   bool
	}{
		{"PLAIN", plain.Auth{User: testbed.AppUser, Pass: s.AppPassword(false)}.AsMechanism(), "PLAIN", false},
		{"OAUTHBEARER", oauth.Auth{Token: s.Token(t, testbed.AppUser, time.Minute, false)}.AsMechanism(), "OAUTHBEARER", false},
		{"PLAIN with a wrong password", plain.Auth{User: testbed.AppUser, Pass: s.AppPassword(true)}.AsMechanism(), "PLAIN", true},
		{"OAUTHBEARER with a token of an unknown key", oauth.Auth{Token: s.Token(t, testbed.AppUser, time.Minute, true)}.AsMechanism(), "OAUTHBEARER", true},
	} {
		failed := s.AuthFailures(t, tc.mechanism)
		c := kadm.NewClient(s.Client(t, tc.mech, kgo.RequestRetries(0)))
		described, err := c.DescribeGroups(ctx, testbed.AppGroupPrefix+"kgo")
		if tc.wantErr {
			if !errors.Is(err, kerr.SaslAuthenticationFailed) || len(described) != 0 {
				t.Errorf("%s: DescribeGroups: %v (%d groups), want SASL_AUTHENTICATION_FAILED and none", tc.name, err, len(described))
			}
			if n := s.AuthFailures(t, tc.mechanism) - failed; n != 1 {
				t.Errorf("%s: %d failed authentications for one request without retries, want 1", tc.name, n)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: DescribeGroups: %v", tc.name, err)
		}
		if g := described[testbed.AppGroupPrefix+"kgo"]; g.Err != nil || g.State != "Stable" {
			t.Errorf("%s: sec-kgo: %v %q", tc.name, g.Err, g.State)
		}
		if err := describeErr(ctx, c, testbed.OtherGroup); !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("%s: %s: %v, want GROUP_AUTHORIZATION_FAILED", tc.name, testbed.OtherGroup, err)
		}
	}

	// Measured: 7 in 5 s, the ListGroups above and then one failure per
	// join of the member, which backs off from 100 ms doubling to 2 s.
	window.check(ctx, t, "franz-go (member package)", 12)
	select {
	case g := <-badAssigned:
		t.Errorf("the wrong-password member was assigned generation %d", g.ID)
	default:
	}
}

// TestSecurityMTLS: franz-go over the SSL listener with a client
// certificate: the principal is User:<CN>; a certificate from another CA,
// or none, is refused during the TLS handshake.
func TestSecurityMTLS(t *testing.T) {
	s, ctx := startSecure(t)
	const cn, group = "mtls-app", testbed.AppGroupPrefix + "mtls"
	offs := kadm.Offsets{}
	offs.AddOffset(testbed.AppTopic, 0, 3, -1)
	if resp, err := s.Admin(t).CommitOffsets(ctx, group, offs); err != nil || resp.Error() != nil {
		t.Fatalf("seeding %s: %v %v", group, err, resp.Error())
	}
	pair := s.CA.Client(t, pkix.Name{CommonName: cn, Organization: []string{"cohort tests"}})
	// mtls is a client of the SSL listener trusting cohort's CA and
	// presenting p, if given, whatever CAs cohort asks for. The subject
	// has an O as well: the principal is User:<CN> alone.
	mtls := func(t *testing.T, p *testpki.Pair) *kadm.Client {
		cfg := s.CA.ClientConfig(nil)
		if p != nil {
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &p.TLS, nil }
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.SSLAddr), kgo.DialTLSConfig(cfg),
			kgo.RequestRetries(0), kgo.DialTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	adm := mtls(t, &pair)
	// Before an ACL names User:mtls-app the group is not its to describe.
	if err := describeErr(ctx, adm, group); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("DescribeGroups %s before its ACL: %v, want GROUP_AUTHORIZATION_FAILED", group, err)
	}
	s.Allow(ctx, t, kadm.NewACLs().Allow("User:"+cn).Groups(group).Operations(kadm.OpDescribe))
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("DescribeGroups over mTLS: %v", err)
	}
	if g := described[group]; g.Err != nil || g.State != "Empty" {
		t.Errorf("DescribeGroups %s with the ACL of User:%s: %v %q, want Empty", group, cn, g.Err, g.State)
	}
	if err := describeErr(ctx, adm, testbed.OtherGroup); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("DescribeGroups %s: %v, want GROUP_AUTHORIZATION_FAILED", testbed.OtherGroup, err)
	}

	// A certificate of another CA, and no certificate: the handshake fails
	// (franz-go reports the TLS alert, "remote error: tls: bad certificate"
	// or "certificate required"), counted as SSL failures.
	before := s.AuthFailures(t, "SSL")
	rogue := testpki.NewCA(t, "rogue-ca").Client(t, pkix.Name{CommonName: cn})
	for name, adm := range map[string]*kadm.Client{"another CA's certificate": mtls(t, &rogue), "no certificate": mtls(t, nil)} {
		listed, err := adm.ListGroups(ctx)
		if err == nil || len(listed) != 0 {
			t.Errorf("%s: ListGroups %v, %v: want refused", name, listed.Groups(), err)
		}
	}
	// Each client tries once (no retries): 1 each, and at most a retry
	// of the dial each. With TLS 1.3 the client may see the server's alert
	// before the server has counted the failed handshake, so the count is
	// awaited (bounded), then checked.
	var n int
	testwait.Until(10*time.Second, func() bool {
		n = s.AuthFailures(t, "SSL") - before
		return n >= 2
	})
	if n < 2 || n > 4 {
		t.Errorf("%d failed SSL authentications for two refused clients, want 2..4", n)
	}
}

// xdgSCRAMClient adapts github.com/xdg-go/scram to sarama's SCRAMClient
// (sarama ships no SCRAM implementation of its own).
type xdgSCRAMClient struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (x *xdgSCRAMClient) Begin(user, password, authzID string) error {
	c, err := x.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgSCRAMClient) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAMClient) Done() bool                            { return x.conv.Done() }

func saramaSecure(s *testbed.Secure, wrong bool) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "sarama-secure"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = s.CA.ClientConfig(nil)
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	cfg.Net.SASL.Version = sarama.SASLHandshakeV1
	cfg.Net.SASL.User = testbed.AppUser
	cfg.Net.SASL.Password = s.AppPassword(wrong)
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAMClient{hash: xscram.SHA512} }
	cfg.Consumer.Return.Errors = true // the offset manager's errors come back from Close
	return cfg
}

// TestSecuritySarama: IBM/sarama's ClusterAdmin and OffsetManager over
// SASL_SSL with SCRAM-SHA-512.
func TestSecuritySarama(t *testing.T) {
	s, ctx := startSecure(t)
	const group = testbed.AppGroupPrefix + "sarama"

	// The wrong password: sarama's client fetches metadata when it is
	// created, trying the seed broker Metadata.Retry.Max (3) more times
	// 250 ms apart, then gives up with ErrOutOfBrokers wrapping
	// ErrSASLAuthenticationFailed ("SASL Authentication failed").
	window := startFailureWindow(t, s, scram512)
	badErr := make(chan error, 1)
	go func() {
		adm, err := sarama.NewClusterAdmin([]string{s.SASLAddr}, saramaSecure(s, true))
		if err == nil {
			adm.Close()
		}
		badErr <- err
	}()

	client, err := sarama.NewClient([]string{s.SASLAddr}, saramaSecure(s, false))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		t.Fatal(err)
	}
	pom, err := om.ManagePartition(testbed.AppTopic, 0)
	if err != nil {
		t.Fatalf("ManagePartition: %v", err)
	}
	pom.MarkOffset(7, "")
	om.Commit()
	if err := pom.Close(); err != nil {
		t.Errorf("PartitionOffsetManager: %v", err)
	}
	if err := om.Close(); err != nil {
		t.Errorf("OffsetManager: %v", err)
	}

	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{testbed.AppTopic: {0}})
	if err != nil {
		t.Fatalf("ListConsumerGroupOffsets: %v", err)
	}
	if blk := offs.GetBlock(testbed.AppTopic, 0); blk == nil || blk.Offset != 7 {
		t.Errorf("ListConsumerGroupOffsets t/0: %+v, want 7", blk)
	}
	listed, err := adm.ListConsumerGroups()
	if err != nil {
		t.Fatalf("ListConsumerGroups: %v", err)
	}
	if _, ok := listed[group]; !ok {
		t.Errorf("ListConsumerGroups: %s missing from %v", group, listed)
	}
	if _, ok := listed[testbed.OtherGroup]; ok {
		t.Errorf("ListConsumerGroups as app lists %s", testbed.OtherGroup)
	}
	described, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil || len(described) != 1 {
		t.Fatalf("DescribeConsumerGroups: %v (%d)", err, len(described))
	}
	if d := described[0]; d.Err != sarama.ErrNoError || d.State != "Empty" {
		t.Errorf("DescribeConsumerGroups %s: %v %q, want Empty", group, d.Err, d.State)
	}
	// sarama looks up each group's coordinator first, and returns the
	// refused FindCoordinator as the call's error.
	if _, err := adm.DescribeConsumerGroups([]string{testbed.OtherGroup}); !errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
		t.Errorf("DescribeConsumerGroups %s: %v, want ErrGroupAuthorizationFailed", testbed.OtherGroup, err)
	}

	err = <-badErr
	if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		t.Errorf("NewClusterAdmin with a wrong password: %v, want ErrSASLAuthenticationFailed", err)
	}
	// Measured: 4 (the first try and 3 retries), then sarama gives up.
	window.check(ctx, t, "sarama", 6)
}

func rdSecure(s *testbed.Secure, wrong bool) *ckafka.ConfigMap {
	return &ckafka.ConfigMap{
		"bootstrap.servers":     s.SASLAddr,
		"broker.address.family": "v4",
		"client.id":             "rd-secure",
		"security.protocol":     "SASL_SSL",
		"sasl.mechanisms":       scram512,
		"sasl.username":         testbed.AppUser,
		"sasl.password":         s.AppPassword(wrong),
		"ssl.ca.location":       s.CA.CertFile,
	}
}

// TestSecurityConfluent: confluent-kafka-go's AdminClient (librdkafka) over
// SASL_SSL with SCRAM-SHA-512.
func TestSecurityConfluent(t *testing.T) {
	s, ctx := startSecure(t)
	const group = testbed.AppGroupPrefix + "rd"
	topic := testbed.AppTopic

	// The wrong password, left running: librdkafka reconnects with its
	// backoff and reports each failure as an error event
	// (ckafka.ErrAuthentication, "SASL authentication error: Authentication
	// failed during authentication due to invalid credentials with SASL
	// mechanism SCRAM-SHA-512"); the admin request itself only times out
	// (context deadline exceeded). An AdminClient made from a producer has
	// the producer's event channel.
	window := startFailureWindow(t, s, scram512)
	type badResult struct {
		authErr bool
		err     error
		groups  int
	}
	badRes := make(chan badResult, 1)
	go func() {
		var res badResult
		defer func() { badRes <- res }()
		p, err := ckafka.NewProducer(rdSecure(s, true))
		if err != nil {
			res.err = err
			return
		}
		defer p.Close()
		badAdm, err := ckafka.NewAdminClientFromProducer(p)
		if err != nil {
			res.err = err
			return
		}
		defer badAdm.Close()
		wctx, wcancel := context.WithDeadline(ctx, window.end)
		defer wcancel()
		listed := make(chan struct{})
		go func() {
			defer close(listed)
			l, err := badAdm.ListConsumerGroups(wctx)
			res.err, res.groups = err, len(l.Valid)
		}()
		for {
			select {
			case ev := <-p.Events():
				if e, ok := ev.(ckafka.Error); ok && e.Code() == ckafka.ErrAuthentication {
					res.authErr = true
				}
			case <-listed:
				return
			}
		}
	}()

	adm, err := ckafka.NewAdminClient(rdSecure(s, false))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	alter := []ckafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: 9}}
	if _, err := adm.AlterConsumerGroupOffsets(ctx, []ckafka.ConsumerGroupTopicPartitions{{Group: group, Partitions: alter}}); err != nil {
		t.Fatalf("AlterConsumerGroupOffsets: %v", err)
	}
	res, err := adm.ListConsumerGroupOffsets(ctx, []ckafka.ConsumerGroupTopicPartitions{{Group: group, Partitions: []ckafka.TopicPartition{{Topic: &topic, Partition: 0}}}})
	if err != nil || len(res.ConsumerGroupsTopicPartitions) != 1 || len(res.ConsumerGroupsTopicPartitions[0].Partitions) != 1 {
		t.Fatalf("ListConsumerGroupOffsets: %v %+v", err, res)
	}
	if o := res.ConsumerGroupsTopicPartitions[0].Partitions[0].Offset; o != 9 {
		t.Errorf("ListConsumerGroupOffsets t/0: %v, want 9", o)
	}
	listed, err := adm.ListConsumerGroups(ctx)
	if err != nil {
		t.Fatalf("ListConsumerGroups: %v", err)
	}
	var names []string
	for _, g := range listed.Valid {
		names = append(names, g.GroupID)
	}
	if !slices.Contains(names, group) || slices.Contains(names, testbed.OtherGroup) {
		t.Errorf("ListConsumerGroups: %v (errors %v), want %s and not %s", names, listed.Errors, group, testbed.OtherGroup)
	}
	described, err := adm.DescribeConsumerGroups(ctx, []string{group, testbed.OtherGroup})
	if err != nil || len(described.ConsumerGroupDescriptions) != 2 {
		t.Fatalf("DescribeConsumerGroups: %v %+v", err, described)
	}
	if d := described.ConsumerGroupDescriptions[0]; d.Error.Code() != ckafka.ErrNoError || d.State != ckafka.ConsumerGroupStateEmpty {
		t.Errorf("DescribeConsumerGroups %s: %v %v, want Empty", group, d.Error, d.State)
	}
	if d := described.ConsumerGroupDescriptions[1]; d.Error.Code() != ckafka.ErrGroupAuthorizationFailed {
		t.Errorf("DescribeConsumerGroups %s: %v, want GROUP_AUTHORIZATION_FAILED", testbed.OtherGroup, d.Error)
	}

	bad := <-badRes
	if !bad.authErr || bad.err == nil || bad.groups != 0 {
		t.Errorf("confluent-kafka-go with a wrong password: authentication error event %v, ListConsumerGroups %v with %d groups: "+
			"want an ErrAuthentication event, a failed request and no groups", bad.authErr, bad.err, bad.groups)
	}
	// Measured: 3 in 5 s; librdkafka reconnects with
	// reconnect.backoff.ms (100 ms doubling to reconnect.backoff.max.ms
	// 10 s, with jitter).
	window.check(ctx, t, "confluent-kafka-go", 8)
}

// kafkajsAdmin runs clients/kafkajs/admin.js with the given password
// and returns its output lines and exit error.
func kafkajsAdmin(ctx context.Context, t *testing.T, s *testbed.Secure, password string, extraEnv ...string) ([]string, error) {
	return secureScript(ctx, t, s, password, exec.CommandContext(ctx, "node", "admin.js"), "kafkajs", extraEnv)
}

// secureScript runs a client script (cmd, in directory dir) as the secure
// bed's app user with the given password, passed with the broker address
// and CA file through the environment, and returns its output lines and
// exit error; its stderr goes to the test log.
func secureScript(ctx context.Context, t *testing.T, s *testbed.Secure, password string, cmd *exec.Cmd, dir string, extraEnv []string) ([]string, error) {
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"BROKER="+s.SASLAddr, "CA_FILE="+s.CA.CertFile,
		"SASL_USERNAME="+testbed.AppUser, "SASL_PASSWORD="+password)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stderr = &prefixWriter{t: t, prefix: dir + " stderr: "}
	out, err := cmd.Output()
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, err
}

// lineWith returns the first line starting with prefix+" ", without it.
func lineWith(lines []string, prefix string) (string, bool) {
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, prefix+" "); ok {
			return rest, true
		}
	}
	return "", false
}

// TestSecurityKafkajs: kafkajs's admin client (clients/kafkajs/admin.js)
// over SASL_SSL with SCRAM-SHA-512; the password reaches it through the
// environment.
func TestSecurityKafkajs(t *testing.T) {
	needKafkajs(t)
	s, ctx := startSecure(t)
	const group = testbed.AppGroupPrefix + "kafkajs"

	// The wrong password: admin.connect() fails with
	// KafkaJSSASLAuthenticationError ("SASL SCRAM SHA512 authentication
	// failed"), which kafkajs does not retry.
	window := startFailureWindow(t, s, scram512)
	type result struct {
		lines []string
		err   error
	}
	badRes := make(chan result, 1)
	go func() {
		lines, err := kafkajsAdmin(ctx, t, s, s.AppPassword(true), "GROUP="+group, "TOPIC="+testbed.AppTopic, "OFFSET=1")
		badRes <- result{lines, err}
	}()

	lines, err := kafkajsAdmin(ctx, t, s, s.AppPassword(false),
		"GROUP="+group, "TOPIC="+testbed.AppTopic, "OFFSET=11", "DENIED_GROUP="+testbed.OtherGroup)
	t.Logf("kafkajs admin: %q", lines)
	if err != nil {
		t.Fatalf("admin.js: %v", err)
	}
	if g, _ := lineWith(lines, "GROUPS"); !strings.Contains(g, `"`+group+`"`) || strings.Contains(g, testbed.OtherGroup) {
		t.Errorf("listGroups as app: %s, want %s and not %s", g, group, testbed.OtherGroup)
	}
	if o, _ := lineWith(lines, "OFFSETS"); !strings.Contains(o, `"partition":0,"offset":"11"`) {
		t.Errorf("fetchOffsets: %s, want t/0 at 11", o)
	}
	if d, _ := lineWith(lines, "DESCRIBE"); !strings.Contains(d, `"groupId":"`+group+`","state":"Empty","errorCode":0`) {
		t.Errorf("describeGroups: %s, want %s Empty", d, group)
	}
	// kafkajs asks every broker for the group's coordinator and, when each
	// answers an error other than GROUP_COORDINATOR_NOT_AVAILABLE (here
	// GROUP_AUTHORIZATION_FAILED, as Kafka answers FindCoordinator for a
	// group the principal may not DESCRIBE), reports
	// KafkaJSGroupCoordinatorNotFound without the cause.
	if d, _ := lineWith(lines, "DENIED"); d != "KafkaJSGroupCoordinatorNotFound" {
		t.Errorf("describeGroups %s: %q, want KafkaJSGroupCoordinatorNotFound (a refused FindCoordinator)", testbed.OtherGroup, d)
	}

	bad := <-badRes
	t.Logf("kafkajs admin with a wrong password: %q %v", bad.lines, bad.err)
	if e, _ := lineWith(bad.lines, "ERROR"); bad.err == nil || !strings.HasPrefix(e, "KafkaJSSASLAuthenticationError") {
		t.Errorf("admin.js with a wrong password: %q (%v), want KafkaJSSASLAuthenticationError", bad.lines, bad.err)
	}
	if _, ok := lineWith(bad.lines, "GROUPS"); ok {
		t.Errorf("admin.js with a wrong password listed groups: %q", bad.lines)
	}
	// Measured: 1. kafkajs does not retry KafkaJSSASLAuthenticationError
	// (retriable false): admin.connect() fails and the script exits.
	window.check(ctx, t, "kafkajs", 3)
}

// kcatProps writes a librdkafka properties file for kcat -F: the password
// stays off the command line.
func kcatProps(t *testing.T, s *testbed.Secure, mechanism string, wrong bool) string {
	props := strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanisms=" + mechanism,
		"sasl.username=" + testbed.AppUser,
		"sasl.password=" + s.AppPassword(wrong),
		"ssl.ca.location=" + s.CA.CertFile,
		"broker.address.family=v4",
	}, "\n") + "\n"
	p := filepath.Join(t.TempDir(), "kcat.properties")
	if err := os.WriteFile(p, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSecurityKcat: kcat -L (metadata) over SASL_SSL with SCRAM-SHA-512,
// and with PLAIN, its configuration in a -F properties file.
//
// Debian's kcat links librdkafka 2.0.2, which (like every librdkafka before
// 2.6.1, confluentinc/librdkafka#4895) sends the client nonce twice in the
// SCRAM client-final message (client nonce + the server's combined nonce).
// Kafka 3.x brokers accept that (the nonce must end with the combined one);
// Kafka 4 rejects it. The SCRAM-SHA-512 case passes only if cohort accepts
// it too.
func TestSecurityKcat(t *testing.T) {
	needKcat(t)
	s, ctx := startSecure(t)
	kcat := func(props string, args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-F", props, "-b", s.SASLAddr, "-m", "5"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), stderr.String(), err
	}

	// The wrong password: librdkafka logs "SASL authentication error:
	// Authentication failed during authentication due to invalid
	// credentials with SASL mechanism SCRAM-SHA-512", reconnects with its
	// backoff until kcat's metadata timeout (-m 5), then kcat exits 1 with
	// "ERROR: Failed to acquire metadata: Local: Broker transport failure".
	window := startFailureWindow(t, s, scram512)
	type result struct {
		out, stderr string
		err         error
	}
	badRes := make(chan result, 1)
	badProps := kcatProps(t, s, scram512, true)
	go func() {
		out, stderr, err := kcat(badProps, "-L")
		badRes <- result{out, stderr, err}
	}()

	for _, mechanism := range []string{scram512, "PLAIN"} {
		good := kcatProps(t, s, mechanism, false)
		out, stderr, err := kcat(good, "-L")
		if err != nil {
			t.Errorf("kcat -L with %s: %v: %s", mechanism, err, stderr)
			continue
		}
		// Metadata lists only the topics app may DESCRIBE.
		if !strings.Contains(out, `topic "t" with 1 partitions`) || strings.Contains(out, `topic "`+testbed.HiddenTopic+`"`) {
			t.Errorf("kcat -L with %s: want topic t and not %s:\n%s", mechanism, testbed.HiddenTopic, out)
		}
		out, stderr, err = kcat(good, "-L", "-t", testbed.AppTopic)
		if err != nil {
			t.Errorf("kcat -L -t t with %s: %v: %s", mechanism, err, stderr)
			continue
		}
		if !strings.Contains(out, `topic "t" with 1 partitions`) || !strings.Contains(out, "partition 0, leader") {
			t.Errorf("kcat -L -t t with %s:\n%s", mechanism, out)
		}
	}

	bad := <-badRes
	t.Logf("kcat -L with a wrong password: exit %v, stderr %q", bad.err, bad.stderr)
	if bad.err == nil || !strings.Contains(bad.stderr, "SASL authentication error") || strings.Contains(bad.out, "topic ") {
		t.Errorf("kcat -L with a wrong password: %v, stdout %q stderr %q: want a SASL authentication error and no metadata", bad.err, bad.out, bad.stderr)
	}
	// Measured: 3 in 5 s.
	window.check(ctx, t, "kcat", 8)
}

// TestSecuritySegmentio: segmentio/kafka-go's Client (its Transport with
// TLS and SASL) over SASL_SSL with SCRAM-SHA-512: commits and fetches an
// offset, lists and describes groups as "app", is refused another group, and
// with a wrong password gets an authentication error.
func TestSecuritySegmentio(t *testing.T) {
	s, ctx := startSecure(t)
	const group = testbed.AppGroupPrefix + "segmentio"
	client := func(wrong bool) *kafka.Client {
		mech, err := kgoscram.Mechanism(kgoscram.SHA512, testbed.AppUser, s.AppPassword(wrong))
		if err != nil {
			t.Fatal(err)
		}
		tr := &kafka.Transport{ClientID: "segmentio-secure", SASL: mech,
			TLS: &tls.Config{RootCAs: s.CA.Pool(), MinVersion: tls.VersionTLS12}}
		t.Cleanup(tr.CloseIdleConnections)
		return &kafka.Client{Addr: kafka.TCP(s.SASLAddr), Transport: tr, Timeout: 10 * time.Second}
	}

	window := startFailureWindow(t, s, scram512)
	// (Not ListGroups: kafka-go sends it to every broker and drops their
	// failures, answering an empty list without an error.)
	bad, badErr := client(true).OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{testbed.AppTopic: {0}}})
	if badErr == nil {
		t.Errorf("OffsetFetch with a wrong password answered %+v", bad)
	}

	c := client(false)
	committed, err := c.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{testbed.AppTopic: {{Partition: 0, Offset: 7}}}})
	if err != nil {
		t.Fatalf("OffsetCommit: %v", err)
	}
	if ps := committed.Topics[testbed.AppTopic]; len(ps) != 1 || ps[0].Error != nil {
		t.Fatalf("OffsetCommit %s: %+v", testbed.AppTopic, ps)
	}
	fetched, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{testbed.AppTopic: {0}}})
	if err != nil || fetched.Error != nil {
		t.Fatalf("OffsetFetch: %v %v", err, fetched.Error)
	}
	if ps := fetched.Topics[testbed.AppTopic]; len(ps) != 1 || ps[0].CommittedOffset != 7 {
		t.Errorf("OffsetFetch %s: %+v, want offset 7", testbed.AppTopic, ps)
	}
	listed, err := c.ListGroups(ctx, &kafka.ListGroupsRequest{})
	if err != nil || listed.Error != nil {
		t.Fatalf("ListGroups: %v %v", err, listed.Error)
	}
	var ids []string
	for _, g := range listed.Groups {
		ids = append(ids, g.GroupID)
	}
	if !slices.Contains(ids, group) || slices.Contains(ids, testbed.OtherGroup) {
		t.Errorf("ListGroups as app: %v, want %s and not %s", ids, group, testbed.OtherGroup)
	}
	described, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{testbed.OtherGroup}})
	if err == nil && len(described.Groups) == 1 {
		err = described.Groups[0].Error
	}
	if !errors.Is(err, kafka.GroupAuthorizationFailed) {
		t.Errorf("DescribeGroups %s: %v, want GroupAuthorizationFailed", testbed.OtherGroup, err)
	}

	if !errors.Is(badErr, kafka.SASLAuthenticationFailed) {
		t.Errorf("OffsetFetch with a wrong password: %v, want SASLAuthenticationFailed", badErr)
	}
	// Measured 2–6 over nine runs (its Transport opens connections for
	// metadata and for the coordinator at once; none retries a refusal).
	window.check(ctx, t, "segmentio/kafka-go", 10)
}

// kafkaPythonSecure runs clients/kafkapython/secure.py with the given
// password and returns its output lines and exit error.
func kafkaPythonSecure(ctx context.Context, t *testing.T, s *testbed.Secure, password string, extraEnv ...string) ([]string, error) {
	return secureScript(ctx, t, s, password, exec.CommandContext(ctx, kafkaPythonInterpreter, "secure.py"), "kafkapython", extraEnv)
}

// TestSecurityKafkaPython: kafka-python (clients/kafkapython/secure.py)
// over SASL_SSL with SCRAM-SHA-512, which it sends the legacy way
// (SaslHandshake v0, then the SCRAM messages framed by their length alone):
// a commit and the admin client's group calls as the app user, filtered and
// refused by the ACLs as for the other clients; a wrong password fails.
func TestSecurityKafkaPython(t *testing.T) {
	needKafkaPython(t)
	s, ctx := startSecure(t)
	const group = testbed.AppGroupPrefix + "kafkapython"

	window := startFailureWindow(t, s, scram512)
	lines, err := kafkaPythonSecure(ctx, t, s, s.AppPassword(false),
		"GROUP="+group, "TOPIC="+testbed.AppTopic, "OFFSET=11", "DENIED_GROUP="+testbed.OtherGroup)
	t.Logf("kafka-python: %q", lines)
	if err != nil {
		t.Fatalf("secure.py: %v", err)
	}
	want := map[string]string{
		"COMMITTED": "11",
		"OFFSETS":   "[('" + testbed.AppTopic + "', 0, 11)]",
		"DESCRIBE":  "[('" + group + "', 'Empty')]",
	}
	for k, v := range want {
		if got, _ := lineWith(lines, k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if g, _ := lineWith(lines, "GROUPS"); !strings.Contains(g, "'"+group+"'") || strings.Contains(g, testbed.OtherGroup) {
		t.Errorf("list_consumer_groups as app: %s, want %s and not %s", g, group, testbed.OtherGroup)
	}
	// kafka-python looks the group's coordinator up first (FindCoordinator
	// v0), which cohort refuses, as Kafka, for a group the principal may
	// not DESCRIBE.
	if d, _ := lineWith(lines, "DENIED"); d != "GroupAuthorizationFailedError" {
		t.Errorf("describe_consumer_groups %s as app: %q, want GroupAuthorizationFailedError", testbed.OtherGroup, d)
	}

	bad, err := kafkaPythonSecure(ctx, t, s, s.AppPassword(true), "GROUP="+group, "TOPIC="+testbed.AppTopic, "OFFSET=1")
	t.Logf("kafka-python with a wrong password: %q %v", bad, err)
	if e, _ := lineWith(bad, "ERROR"); err == nil || e == "" {
		t.Errorf("secure.py with a wrong password: %q (%v), want an ERROR line and exit code 2", bad, err)
	}
	if _, ok := lineWith(bad, "COMMITTED"); ok {
		t.Errorf("secure.py with a wrong password committed: %q", bad)
	}
	// Measured: 2. The admin client tries its bootstrap server, gives up
	// (NoBrokersAvailable) and the script exits.
	window.check(ctx, t, "kafka-python", 4)
}
