package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterEtcdAuthEnabledWhileRunning: etcd's authentication turned on
// while a node without an etcd user runs. etcd then refuses the node's
// requests with "user name is empty"; the node says what to do about it as
// it does when it cannot start for that reason: in the CreateTopics answer
// of a catalog write refused so, and in the warning of each session it
// cannot begin.
func TestClusterEtcdAuthEnabledWhileRunning(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	var logged testlog.Buffer
	const prefix = "/late-auth/"
	const hint = "give it an etcd user: --etcd-user, with the password in --etcd-password-file or COHORT_ETCD_PASSWORD"
	// The topic below must be written to etcd while the node still has
	// its lease (without one, the node refuses the write itself): its
	// clock stands still from when etcd's authentication is turned on
	// until the write is answered, then jumps by the TTL, so that the
	// lease runs out in its view and it tries (and fails) to begin a new
	// session, on any machine and without waiting out the TTL.
	clk := &leaseClock{}
	n, err := Start(Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 2,
		Logger:  slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: authLeaseTTL, clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	clk.Freeze()
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": "late-pass"})
	holdLease(t, ec, prefix, 1, "root-pass")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, n.Addr()))
	rs, err := adm.CreateTopics(ctx, 1, 1, nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["events"]; r.Err == nil || !strings.Contains(r.ErrMessage, "user name is empty") || !strings.Contains(r.ErrMessage, hint) {
		t.Errorf("CreateTopics: %v %q; want etcd's refusal with the hint %q", r.Err, r.ErrMessage, hint)
	}

	clk.Jump(authLeaseTTL)
	refused := func() string {
		for l := range strings.Lines(logged.String()) {
			if strings.Contains(l, "user name is empty") && strings.Contains(l, "could not begin a session") {
				return l
			}
		}
		return ""
	}
	testwait.For(t, 30*time.Second, "a session refused for want of an etcd user", func() bool { return refused() != "" })
	if l := refused(); !strings.Contains(l, hint) {
		t.Fatalf("the warning does not say %q:\n%s", hint, l)
	}
}
