package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	nested := etcdKeys(t, etcd, "/cohort/dev") // /cohort/dev/'s 5, /cohort/dev2/'s 3
	runEtcdctlTxn(t, ec, etcd, deletionTxn(t, errOut))
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

	// The input spells prefixes a shell, printf or etcdctl would read
	// otherwise (quotes, %, a backslash, a non-ASCII letter, a control
	// character, a leading "-", which etcdctl would take for an option)
	// as they are.
	for _, odd := range []string{"/it's 100%\\n é/", `-x "q" \`, "\x01 tab\t/"} {
		c.ok("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", odd)
		_, errOut, _ = c.run("store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", odd)
		runEtcdctlTxn(t, ec, etcd, deletionTxn(t, errOut))
		if k := etcdKeys(t, etcd, odd); k != 0 {
			t.Fatalf("%d keys under %q after the printed deletion (%s)", k, odd, errOut)
		}
	}
	checkKept(t, etcd, records)
}

// deletionTxn is the etcdctl txn input a refusal of a destination that
// is not empty prints, between its two etcdDeleteRule lines; it fails the
// test if there is none or it is not plain ASCII text.
func deletionTxn(t *testing.T, errOut string) string {
	t.Helper()
	rule := "\n" + etcdDeleteRule + "\n"
	_, rest, ok := strings.Cut(errOut, rule)
	if !ok {
		t.Fatalf("the refusal prints no etcdctl txn input:\n%s", errOut)
	}
	in, _, ok := strings.Cut(rest, rule)
	if !ok {
		t.Fatalf("the etcdctl txn input has no end:\n%s", errOut)
	}
	for _, c := range []byte(in) {
		if c != '\n' && (c < 0x20 || c >= 0x7f) {
			t.Fatalf("the etcdctl txn input holds byte %#x, which a terminal, a code page or a shell may change:\n%s", c, in)
		}
	}
	if !strings.Contains(errOut, "the lines between the "+etcdDeleteRule+" lines above") {
		t.Fatalf("the refusal does not say what to do with the input:\n%s", errOut)
	}
	return in + "\n"
}

// runEtcdctlTxn carries out in etcd the transaction that etcdctl txn
// would make of input. With COHORT_TEST_ETCDCTL naming an etcdctl binary,
// that etcdctl runs it; otherwise the input is read by etcdctl's rules:
// lines trimmed of spaces, sections (comparisons, requests on success,
// requests on failure) each ended by an empty line, words split at
// spaces, and a word in double quotes unquoted as a Go string is. Only
// "del -- KEY [END]" requests and no comparison are accepted: the printed
// input needs no other.
func runEtcdctlTxn(t *testing.T, ec *etcdtest.Cluster, etcd *clientv3.Client, input string) {
	t.Helper()
	if bin := os.Getenv("COHORT_TEST_ETCDCTL"); bin != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--endpoints", strings.Join(ec.Endpoints(), ","), "txn")
		cmd.Stdin = strings.NewReader(input)
		var stderr strings.Builder
		cmd.Stderr = &stderr // etcdctl warns of each range, naming it
		out, err := cmd.Output()
		if err != nil || !strings.HasPrefix(string(out), "SUCCESS") {
			t.Fatalf("%s txn: %v\n%s%s\ninput:\n%s", bin, err, out, stderr.String(), input)
		}
		t.Logf("%s txn:\n%s%s", bin, stderr.String(), out)
		return
	}
	lines := strings.Split(input, "\n")
	section := func() []string {
		var s []string
		for len(lines) > 0 {
			l := strings.TrimSpace(lines[0])
			lines = lines[1:]
			if l == "" {
				return s
			}
			s = append(s, l)
		}
		t.Fatalf("etcdctl txn input ends before its section does (etcdctl exits on EOF):\n%q", input)
		return nil
	}
	if cmps := section(); len(cmps) != 0 {
		t.Fatalf("etcdctl txn input compares %q", cmps)
	}
	var ops []clientv3.Op
	for _, l := range section() {
		args := etcdctlWords(t, l)
		if len(args) < 3 || len(args) > 4 || args[0] != "del" || args[1] != "--" {
			t.Fatalf("etcdctl txn request %q: not del -- KEY [END]", l)
		}
		var opts []clientv3.OpOption
		if len(args) == 4 {
			opts = append(opts, clientv3.WithRange(args[3]))
		}
		ops = append(ops, clientv3.OpDelete(args[2], opts...))
	}
	if fail := section(); len(fail) != 0 {
		t.Fatalf("etcdctl txn input has failure requests %q", fail)
	}
	if _, err := etcd.Txn(context.Background()).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
}

// etcdctlWords splits an etcdctl txn request into its words: runs of
// non-spaces, or double-quoted Go strings, unquoted.
func etcdctlWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for line = strings.TrimLeft(line, " "); line != ""; line = strings.TrimLeft(line, " ") {
		if line[0] != '"' {
			w, rest, _ := strings.Cut(line, " ")
			words, line = append(words, w), rest
			continue
		}
		end := 1
		for end < len(line) && line[end] != '"' {
			if line[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(line) {
			t.Fatalf("etcdctl txn request %q: a quote is not closed", line)
		}
		w, err := strconv.Unquote(line[:end+1])
		if err != nil {
			t.Fatalf("etcdctl txn request: %s: %v", line[:end+1], err)
		}
		words, line = append(words, w), line[end+1:]
	}
	return words
}
