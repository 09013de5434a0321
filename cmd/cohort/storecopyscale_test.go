package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestStoreCopyScale measures cohort store copy on a large state, both
// ways, each run as a child process (its peak RSS is the copy's alone):
// COHORT_TEST_STORECOPY_GROUPS groups over 50 coordinator partitions, each
// with its metadata (300 bytes), 100 committed offsets (20 topics of 5
// partitions) and 20 rebalance history records (370 bytes), in the records'
// own key shapes; into an etcd in this process with a quota of 8 GiB, as an
// operator would raise it, of COHORT_TEST_STORECOPY_ETCD_MEMBERS members
// (default 1). Opt-in only:
//
//	COHORT_TEST_STORECOPY_GROUPS=10000 go test -run TestStoreCopyScale -v ./cmd/cohort/
func TestStoreCopyScale(t *testing.T) {
	groups, _ := strconv.Atoi(os.Getenv("COHORT_TEST_STORECOPY_GROUPS"))
	if groups <= 0 {
		t.Skip("set COHORT_TEST_STORECOPY_GROUPS to the number of groups to copy")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	st, err := disk.Open(disk.Options{Dir: dir, NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	hist := []byte(strings.Repeat(`{"event":"rebalance","members":["m-1","m-2"],"reason":"join"}`, 6))
	records := 1
	if err := st.Append(ctx, -1, []store.Record{{Key: []byte("partitions"), Value: []byte("50")}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for g := range groups {
		id := fmt.Sprintf("consumer-group-%05d", g)
		recs := []store.Record{{Key: append([]byte{0x01}, id...), Value: make([]byte, 300)}}
		for tp := range 100 {
			k := str(str([]byte{0x02}, id), fmt.Sprintf("topic-events-%02d", tp/5))
			k = binary.BigEndian.AppendUint32(k, uint32(tp%5))
			v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint16(nil, 0), uint64(g*1000+tp))
			v = binary.BigEndian.AppendUint64(str(binary.BigEndian.AppendUint32(v, 3), ""), 1765000000000)
			recs = append(recs, store.Record{Key: k, Value: binary.BigEndian.AppendUint64(v, 0)})
		}
		for h := range 20 {
			recs = append(recs, store.Record{Key: binary.BigEndian.AppendUint64(str([]byte{0x09}, id), uint64(h)), Value: hist})
		}
		if err := st.Append(ctx, int32(g%50), recs); err != nil {
			t.Fatal(err)
		}
		records += len(recs)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("source: %d records written in %s", records, time.Since(start).Round(time.Millisecond))

	members, _ := strconv.Atoi(os.Getenv("COHORT_TEST_STORECOPY_ETCD_MEMBERS"))
	ec := etcdtest.StartWith(t, max(1, members), func(c *embed.Config) { c.QuotaBackendBytes = 8 << 30 })
	ep := strings.Join(ec.Endpoints(), ",")
	copyAs := func(what string, args ...string) {
		t.Helper()
		cmd := cohortCommand(ctx, t, append([]string{"store", "copy"}, args...)...)
		cmd.Env = append(cmd.Env, "COHORT_TEST_PEAK_RSS=1")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil || !strings.Contains(string(out), "verified: ") {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		rss := "unknown"
		if _, after, ok := strings.Cut(string(out), "peak RSS VmHWM:"); ok {
			rss = strings.Join(strings.Fields(after)[:2], " ")
		}
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		t.Logf("%s: %d records in %s (%.0f records/s, CPU %s), peak RSS %s", what, records, took.Round(time.Millisecond),
			float64(records)/took.Seconds(), cpu.Round(10*time.Millisecond), rss)
	}
	copyAs("data dir to etcd", "--from-data-dir", dir, "--to-etcd", ep)
	status, err := ec.Client(t).Status(ctx, ec.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd: database %d MiB (%d MiB in use)", status.DbSize>>20, status.DbSizeInUse>>20)
	copyAs("etcd to data dir", "--from-etcd", ep, "--to-data-dir", filepath.Join(t.TempDir(), "back"))
}
