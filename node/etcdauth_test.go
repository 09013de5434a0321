package node

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterEtcdAuthentication: against an etcd with authentication
// enabled, a node whose etcd user may only read and write the keys under its
// prefix starts and keeps its state there; a wrong password, a missing user
// and a user without permission on the prefix are refused at start with an
// error that says which, and never contains the password.
func TestClusterEtcdAuthentication(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const prefix, pass = "/authed/", "etcd-pass-7f3a"
	ec.EnableAuth(t, "root-pass", prefix, map[string]string{"cohort": pass}, "other")

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(user, password string) (*Node, error) {
		return Start(Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 2, Logger: quiet,
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL,
				Username: user, Password: password, DialTimeout: 30 * time.Second}}) // etcd's bcrypt under the race detector on a loaded machine
	}
	for _, tc := range []struct {
		name, user, password, want string
	}{
		{"wrong password", "cohort", "not-" + pass, `the etcd user "cohort" or its password is wrong`},
		{"no user", "", "", "give it an etcd user: --etcd-user, with the password in --etcd-password-file or COHORT_ETCD_PASSWORD"},
		{"no permission on the prefix", "other", "other-password", `needs read-write permission on the keys under "/authed/"`},
	} {
		n, err := start(tc.user, tc.password)
		if err == nil {
			n.Close()
			t.Fatalf("%s: the node started", tc.name)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, pass) {
			t.Errorf("%s: error %q; want it to say %q, without the password", tc.name, msg, tc.want)
		}
	}
	if _, err := start("cohort", ""); err == nil || !strings.Contains(err.Error(), "needs its password") {
		t.Errorf("a user without a password: %v", err)
	}

	n, err := start("cohort", pass)
	if err != nil {
		t.Fatalf("the node with its etcd user: %v", err)
	}
	defer n.Close()
	adm := kadm.NewClient(client(t, n.Addr()))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "events", Partition: 0, At: 42, LeaderEpoch: -1})
	var r kadm.OffsetResponses
	for ctx.Err() == nil { // until the node owns the group's partition
		if r, err = adm.CommitOffsets(ctx, "g", offs); err == nil && r.Error() == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), Username: "root", Password: "root-pass",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	all, err := root.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Kvs) == 0 {
		t.Fatal("nothing in etcd")
	}
	for _, kv := range all.Kvs {
		if !strings.HasPrefix(string(kv.Key), prefix) {
			t.Errorf("key %q outside the prefix", kv.Key)
		}
	}
}

func TestClusterConfigWarnings(t *testing.T) {
	for _, tc := range []struct {
		cc   ClusterConfig
		warn bool
	}{
		{ClusterConfig{Endpoints: []string{"10.0.0.5:2379"}, Username: "u", Password: "p"}, true},
		{ClusterConfig{Endpoints: []string{"127.0.0.1:2379", "http://etcd-2:2379"}, Username: "u", Password: "p"}, true},
		{ClusterConfig{Endpoints: []string{"127.0.0.1:2379", "http://localhost:2379"}, Username: "u", Password: "p"}, false},
		{ClusterConfig{Endpoints: []string{"https://etcd-1:2379"}, Username: "u", Password: "p"}, false},
		{ClusterConfig{Endpoints: []string{"etcd-1:2379"}, CAFile: "ca.pem", Username: "u", Password: "p"}, false},
		{ClusterConfig{Endpoints: []string{"etcd-1:2379"}}, false},
	} {
		w := tc.cc.Warnings()
		if (len(w) > 0) != tc.warn {
			t.Errorf("%+v: warnings %q, want some: %v", tc.cc.Endpoints, w, tc.warn)
		}
		for _, s := range w {
			if strings.Contains(s, "p\"") || !strings.Contains(s, "clear text") {
				t.Errorf("warning %q", s)
			}
		}
	}
}
