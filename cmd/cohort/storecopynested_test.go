package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// putAll writes kvs into etcd, the keys on lease if it is not 0.
func putAll(t *testing.T, etcd *clientv3.Client, kvs map[string]string, lease clientv3.LeaseID) {
	t.Helper()
	for k, v := range kvs {
		var opts []clientv3.OpOption
		if lease != 0 {
			opts = append(opts, clientv3.WithLease(lease))
		}
		if _, err := etcd.Put(context.Background(), k, v, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// checkKept fails the test unless etcd still holds every key of kvs with
// its value.
func checkKept(t *testing.T, etcd *clientv3.Client, kvs map[string]string) {
	t.Helper()
	for k, v := range kvs {
		r, err := etcd.Get(context.Background(), k)
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != v {
			t.Fatalf("another cluster's key %q: %v %v", k, r, err)
		}
	}
}

// TestStoreCopyNestedPrefixes: clusters whose prefixes nest in ours and
// start with the names of cohort's own key groups (/cohort/dev/ and
// /cohort/nodes/eu/ beside --etcd-prefix /cohort/, /cohort/ beside
// /cohort/dev/) are not ours: their records are no records of ours, their
// live nodes no nodes of ours; the copy goes both ways beside them and
// leaves them as they were. A destination that does hold our records is
// refused with a deletion command that, run, deletes ours and none of
// theirs.
func TestStoreCopyNestedPrefixes(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ep := strings.Join(ec.Endpoints(), ",")
	etcd := ec.Client(t)
	lease, err := etcd.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	// Two clusters nested under /cohort/, running: nodes on their leases.
	records := map[string]string{"/cohort/dev/d\xff\xff\xff\xffpartitions": "3", "/cohort/dev/d\x00\x00\x00\x01\x02offset": "o",
		"/cohort/dev/compaction": "", "/cohort/nodes/eu/d\xff\xff\xff\xffpartitions": "2"}
	live := map[string]string{"/cohort/dev/nodes/1": "n", "/cohort/dev/own/0": "1", "/cohort/nodes/eu/nodes/4": "n", "/cohort/nodes/eu/own/1": "4"}
	putAll(t, etcd, records, 0)
	putAll(t, etcd, live, lease.ID)
	dir := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("2")}},
		0: {{Key: []byte("\x02offset"), Value: []byte("v")}}, -2: {{Key: []byte("u"), Value: []byte("s")}}})
	c := cli{t: t}
	out := c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/cohort/")
	if !strings.Contains(out, "verified: ") {
		t.Fatalf("copy into /cohort/:\n%s", out)
	}
	back := filepath.Join(t.TempDir(), "back")
	if out := c.ok("store", "copy", "--from-etcd", ep, "--etcd-prefix", "/cohort/", "--to-data-dir", back); !strings.Contains(out, "verified: ") {
		t.Fatalf("copy back from /cohort/:\n%s", out)
	}
	checkKept(t, etcd, records)
	checkKept(t, etcd, live)
	// A destination with live nodes of its own is in use, not merely
	// "not empty" (their keys go with their leases, no command deletes
	// them).
	c.fails(1, []string{"store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/cohort/dev/"},
		`prefix "/cohort/dev/" is in use: cohort nodes are running on it (node ids 1:`, "nothing was copied: stop every node")

	// The other way round: a cluster at /cohort/ (just copied there)
	// beside one copied to /cohort/dev2/.
	if out := c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/cohort/dev2/"); !strings.Contains(out, "verified: ") {
		t.Fatalf("copy into /cohort/dev2/:\n%s", out)
	}

	// /cohort/ holds 3 records of ours, and no key of the nested clusters
	// is counted, nor deleted by the command the refusal prints.
	_, errOut, code := c.run("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/cohort/")
	if code != 1 || !strings.Contains(errOut, `prefix "/cohort/" is not empty (3 cohort keys under it`) {
		t.Fatalf("a copy into /cohort/ again: exit %d\n%s", code, errOut)
	}
	_, cmdLine, ok := strings.Cut(errOut, "another cluster's prefix may start with it): ")
	if !ok {
		t.Fatalf("the refusal prints no deletion:\n%s", errOut)
	}
	nested := etcdKeys(t, etcd, "/cohort/dev") // /cohort/dev/'s 5, /cohort/dev2/'s 3
	runEtcdctl(t, etcd, strings.TrimSpace(cmdLine))
	if k := etcdKeys(t, etcd, "/cohort/"); k != nested+3 {
		// Ours gone; /cohort/nodes/eu/'s 3 kept.
		t.Fatalf("after the printed deletion, %d keys under /cohort/, want %d", k, nested+3)
	}
	checkKept(t, etcd, records)
	checkKept(t, etcd, live)
	if k := etcdKeys(t, etcd, "/cohort/dev2/"); k != 3 {
		t.Fatalf("/cohort/dev2/ holds %d keys after the deletion of /cohort/'s, want its 3", k)
	}
	if out := c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", "/cohort/"); !strings.Contains(out, "verified: ") {
		t.Fatalf("copy into /cohort/ after the deletion:\n%s", out)
	}

	// The command spells a prefix the shell or printf would read
	// otherwise (a quote, %, a backslash, a non-ASCII letter) as it is.
	const odd = "/it's 100%\\n é/"
	c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", odd)
	_, errOut, _ = c.run("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", odd)
	_, cmdLine, ok = strings.Cut(errOut, "another cluster's prefix may start with it): ")
	if !ok {
		t.Fatalf("the refusal prints no deletion:\n%s", errOut)
	}
	runEtcdctl(t, etcd, strings.TrimSpace(cmdLine))
	if k := etcdKeys(t, etcd, odd); k != 0 {
		t.Fatalf("%d keys under %q after the printed deletion (%s)", k, odd, cmdLine)
	}
}

// runEtcdctl runs line, a shell command of etcdctl del commands, with an
// etcdctl that records its arguments, and carries them out on etcd: what
// the command would delete, exactly as the shell hands the keys over.
func runEtcdctl(t *testing.T, etcd *clientv3.Client, line string) {
	t.Helper()
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\" >> " + log + "; done\nprintf '\\n\\0' >> " + log + "\n"
	if err := os.WriteFile(filepath.Join(bin, "etcdctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh -c %q: %v\n%s", line, err, b)
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range bytes.Split(bytes.TrimSuffix(calls, []byte("\n\x00")), []byte("\n\x00")) {
		args := strings.Split(strings.TrimSuffix(string(call), "\x00"), "\x00")
		if len(args) == 0 || args[0] != "del" {
			t.Fatalf("etcdctl %q: not a del", args)
		}
		var opts []clientv3.OpOption
		switch {
		case len(args) == 3 && args[1] == "--prefix":
			args, opts = args[1:], append(opts, clientv3.WithPrefix())
		case len(args) == 3:
			opts = append(opts, clientv3.WithRange(args[2]))
		case len(args) != 2:
			t.Fatalf("etcdctl %q: not del KEY, del KEY END or del --prefix KEY", args)
		}
		if _, err := etcd.Delete(context.Background(), args[1], opts...); err != nil {
			t.Fatal(err)
		}
	}
}
