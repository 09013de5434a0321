package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// discardEnv is an env whose output goes nowhere.
func discardEnv() env {
	return env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, clock: clock.Real{}}
}

// cli runs cohort with args in-process, as main does, and returns its
// standard output, standard error and exit code.
type cli struct {
	t     *testing.T
	clock clock.Clock
	base  []string // appended to every command line (--bootstrap ...)
}

func (c cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	clk := c.clock
	if clk == nil {
		clk = clock.Real{}
	}
	code = run(append(args, c.base...), env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, clock: clk})
	return out.String(), errOut.String(), code
}

// ok runs args and fails the test unless the exit code is 0; it returns
// standard output.
func (c cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	return out
}

// fails runs args, wants exit code want and stderr holding every one of
// msgs, and returns stdout.
func (c cli) fails(want int, args []string, msgs ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != want {
		c.t.Fatalf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errOut)
	}
	for _, m := range msgs {
		if !strings.Contains(errOut, m) {
			c.t.Fatalf("%q: stderr lacks %q:\n%s", args, m, errOut)
		}
	}
	return out
}

// jsonOf runs args with --output json and decodes the result into v.
func (c cli) jsonOf(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "--output", "json")...)
	if err := decodeStrict(out, v); err != nil {
		c.t.Fatalf("%q: %v\n%s", args, err, out)
	}
}

// decodeStrict decodes the JSON document out into v, refusing fields v
// does not have.
func decodeStrict(out string, v any) error {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// startNode starts an in-process cohort node on listen (127.0.0.1:0 for
// any port).
func startNode(t *testing.T, listen string) *node.Node {
	t.Helper()
	return startNodeWith(t, listen, nil)
}

// startNodeWith is startNode with the group configuration changed by set
// (when not nil).
func startNodeWith(t *testing.T, listen string, set func(*group.Config)) *node.Node {
	t.Helper()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	if set != nil {
		set(&cfg)
	}
	return startNodeConfig(t, node.Config{Listen: listen, Group: cfg})
}

// startNodeConfig starts an in-process node with cfg, on a memory store
// and without logs, and waits until it is loaded.
func startNodeConfig(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	cfg.Store = memstore.New()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// dataCluster is a kfake cluster standing for the Kafka cluster that holds
// the records.
type dataCluster struct {
	addr string
	adm  *kadm.Client
	cl   *kgo.Client
}

func startData(t *testing.T, partitions int32, topics ...string) dataCluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return dataCluster{addr: addr, adm: kadm.NewClient(cl), cl: cl}
}

// produce writes n records to topic's partition p, the i-th stamped
// start+i seconds.
func (d dataCluster) produce(t *testing.T, topic string, p int32, n int, start time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("v"), Timestamp: start.Add(time.Duration(i) * time.Second)}
		if err := d.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// endOffsets is what the data cluster itself says the log ends are.
func (d dataCluster) endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := d.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// adminOf is an admin client of addr and a context for one call, both
// released when the test ends.
func adminOf(t *testing.T, addr string) (*kadm.Client, context.Context) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return kadm.NewClient(cl), ctx
}

// commit commits offsets of group on addr as an admin.
func commit(t *testing.T, addr, grp, topic string, offsets map[int32]int64) {
	t.Helper()
	adm, ctx := adminOf(t, addr)
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	rs, err := adm.CommitOffsets(ctx, grp, os)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// committed reads group's committed offsets of topic on addr.
func committed(t *testing.T, addr, grp, topic string) map[int32]int64 {
	t.Helper()
	// By name (OffsetFetch v9): a v10 fetch of all topics would leave out
	// a topic outside cohort's catalog.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), byname.Opt())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := kadm.NewClient(cl).FetchOffsets(ctx, grp)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, r := range rs[topic] {
		out[p] = r.At
	}
	return out
}

// consumer joins group on addr consuming topic, and returns once the group
// assigned it partitions; stop it with the returned function.
func consumer(t *testing.T, addr, grp, topic, clientID, instanceID string) func() {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic), kgo.ClientID(clientID),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	assigned := make(chan struct{}, 1)
	opts = append(opts, kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
		select {
		case assigned <- struct{}{}:
		default:
		}
	}))
	_, stop := polling(t, opts...)
	select {
	case <-assigned:
	case <-time.After(15 * time.Second):
		t.Fatalf("consumer %s: no assignment", clientID)
	}
	return stop
}

// polling starts a group consumer with opts that polls until the test ends
// or the returned function closes it (a leave).
func polling(t *testing.T, opts ...kgo.Opt) (*kgo.Client, func()) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			if cl.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-polled
			cl.Close() // leaves the group
		}
	}
	t.Cleanup(stop)
	return cl, stop
}

// listGroups runs "groups" with args as JSON.
func (c cli) listGroups(args ...string) []listedGroupJSON {
	c.t.Helper()
	var listed struct {
		Groups []listedGroupJSON `json:"groups"`
	}
	c.jsonOf(&listed, append([]string{"groups"}, args...)...)
	return listed.Groups
}

// TestWarnsAboutReadableSecretFiles: a command given a password file or a
// --command-config with a password that other users of the machine can read
// warns on standard error (and still runs); so does user set given such a
// file for the new password.
func TestWarnsAboutReadableSecretFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := cli{t: t, base: []string{"--bootstrap", closedAddr(t), "--timeout", "200ms", "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "u", "--sasl-password-file", pw}}
	if _, errOut, _ := c.run("groups"); strings.Contains(errOut, "warning") {
		t.Fatalf("a 0600 password file warned:\n%s", errOut)
	}
	if err := os.Chmod(pw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := c.run("groups")
	if code == 0 || !strings.Contains(errOut, "cohort: warning: "+pw+" holds a secret") || !strings.Contains(errOut, "chmod 600") || strings.Contains(errOut, "s3cret") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}

	// The new password of user set, from a file, likewise.
	newPw := filepath.Join(dir, "new-pw")
	if err := os.WriteFile(newPw, []byte("n3w-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := cli{t: t, base: []string{"--bootstrap", closedAddr(t), "--timeout", "200ms"}}
	if _, errOut, _ := u.run("user", "set", "bob", "--password-file", newPw); strings.Contains(errOut, "warning") {
		t.Fatalf("user set with a 0600 password file warned:\n%s", errOut)
	}
	if err := os.Chmod(newPw, 0o640); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = u.run("user", "set", "bob", "--password-file", newPw)
	if code == 0 || !strings.Contains(errOut, "cohort: warning: "+newPw+" holds a secret") || strings.Contains(errOut, "n3w-secret") {
		t.Fatalf("user set with a group-readable password file: exit %d, stderr:\n%s", code, errOut)
	}
}
