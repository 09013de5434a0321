package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/internal/byname"
)

// benchViewerPassword is the password of the benchmark's viewer with
// per-group ACLs (a test value, like adminPassword).
const benchViewerPassword = "viewer-secret-1"

// benchLiterals is how many literal ACLs the benchmark's viewer has: one
// group of every 10 from grp-0050000 on.
const benchLiterals = 1000

// benchViewerMay reports whether the benchmark's viewer may describe id:
// two prefixed ACLs (team-needle-, the 12 needles; grp-000, the first
// 10,000 groups) and benchLiterals literal ones.
func benchViewerMay(id string) bool {
	if strings.HasPrefix(id, "team-needle-") || strings.HasPrefix(id, "grp-000") {
		return true
	}
	var i int
	if _, err := fmt.Sscanf(id, "grp-%07d", &i); err != nil {
		return false
	}
	return i >= 50000 && i < 50000+10*benchLiterals && i%10 == 0
}

// BenchmarkGroupsPageSearchACL measures a view of the groups page on a
// node of 100,000 groups (COHORT_BENCH_CONSOLE_GROUPS sets another count)
// whose listener is SASL, for two viewers: "all", the admin, a super user
// who may describe every group, and "acl", a user who may describe about
// 11,000 of them through per-group ACLs (2 prefixed, 1,000 literal), so
// that the node checks each group against the ACLs as its partitions list
// them, each under its partition's lock. Metrics as in
// BenchmarkGroupsPageSearch; each view logs in with SCRAM, both viewers
// with the same iteration count.
//
// The commits/ cases measure what the listing does to other requests on
// the same partitions: the admin commits an offset of one of the
// benchmark's groups (every partition in turn), one commit after the
// other, while one view runs (none for "idle", where an op is 100
// commits), and reports the commits' latency: commit-p50-us,
// commit-p99-us and commit-max-us, over every op.
//
//	go test -run '^$' -bench GroupsPageSearchACL -benchmem -benchtime 10x ./console/
func BenchmarkGroupsPageSearchACL(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 100,000 groups into a node (about a minute)")
	}
	groups := benchGroups(b)
	n := startBenchNode(b, groups, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kcl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.WithLogger(nil), byname.Opt(), benchAdmin())
	if err != nil {
		b.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)
	// The viewer's SCRAM login costs what the admin's does.
	described, err := adm.DescribeUserSCRAMs(ctx, "admin")
	if err != nil || described.Error() != nil {
		b.Fatalf("DescribeUserSCRAMs: %v %v", err, described.Error())
	}
	iterations := int32(0)
	for _, c := range described["admin"].CredInfos {
		if c.Mechanism == kadm.ScramSha512 {
			iterations = c.Iterations
		}
	}
	if iterations == 0 {
		b.Fatal("the admin has no SCRAM-SHA-512 credential")
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "viewer", Mechanism: kadm.ScramSha512,
		Iterations: iterations, Password: benchViewerPassword}})
	if err != nil || res.Error() != nil {
		b.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	literals := make([]string, 0, benchLiterals)
	for k := range benchLiterals {
		literals = append(literals, fmt.Sprintf("grp-%07d", 50000+10*k))
	}
	for _, acls := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:viewer").Groups("team-needle-", "grp-000").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpDescribe),
		kadm.NewACLs().Allow("User:viewer").Groups(literals...).Operations(kadm.OpDescribe),
	} {
		created, err := adm.CreateACLs(ctx, acls)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range created {
			if r.Err != nil {
				b.Fatalf("CreateACLs: %v", r.Err)
			}
		}
	}
	visible := 0
	for i := range groups {
		if benchViewerMay(benchGroupID(i, groups)) {
			visible++
		}
	}
	c := New(saslBenchNode{n}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.timeout = 5 * time.Minute
	srv := httptest.NewServer(c)
	defer srv.Close()
	hc := &http.Client{Timeout: 5 * time.Minute}
	viewers := []struct{ name, user, password string }{{"all", "admin", adminPassword}, {"acl", "viewer", benchViewerPassword}}
	view := func(viewer int, query string) (int, error) {
		v := viewers[viewer]
		return getPage(hc, srv.URL+"/console/"+query, v.user, v.password)
	}
	cases := []struct{ name, query string }{{"nosearch", ""}, {"few", "?q=needle"}, {"fewprefix", "?q=team-needle-&match=prefix"}}
	for _, tc := range cases {
		for vi, v := range viewers {
			// The page the viewer sees: her groups only.
			listed := groups
			if v.name == "acl" {
				listed = visible
			}
			want := fmt.Sprintf("%s of %s groups match", num(benchNeedles), num(listed))
			if tc.query == "" {
				want = fmt.Sprintf("the first %s of %s", num(maxGroupRows), num(listed))
			}
			resp, err := hc.Do(func() *http.Request {
				r, _ := http.NewRequest(http.MethodGet, srv.URL+"/console/"+tc.query, nil)
				r.SetBasicAuth(v.user, v.password)
				return r
			}())
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
				b.Fatalf("%s as %s: %d, the page does not say %q\n%.2000s", tc.query, v.name, resp.StatusCode, want, body)
			}
			b.Run(tc.name+"/"+v.name, func(b *testing.B) { measureViews(b, n, func() (int, error) { return view(vi, tc.query) }) })
		}
	}
	// Commits while the console lists.
	commit := func(k int) error { return benchCommit(ctx, kcl, benchGroupID((k*7919)%groups, groups), int64(k)) }
	if err := commit(0); err != nil { // connected and authenticated before measuring
		b.Fatal(err)
	}
	for _, during := range []struct {
		name   string
		viewer int // -1: no view
		query  string
	}{{"idle", -1, ""}, {"nosearch-all", 0, ""}, {"nosearch-acl", 1, ""}, {"few-all", 0, "?q=needle"}, {"few-acl", 1, "?q=needle"}} {
		b.Run("commits/"+during.name, func(b *testing.B) {
			var lat []time.Duration
			k := 0
			for b.Loop() {
				done := make(chan error, 1)
				if during.viewer >= 0 {
					go func() { _, err := view(during.viewer, during.query); done <- err }()
				} else {
					done <- nil
				}
				// Commits until the view is done (at least one; at most
				// 10,000, or 100 without a view).
				for i := 0; i < 10000; i++ {
					t0 := time.Now()
					if err := commit(k); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					k++
					if during.viewer < 0 {
						if i == 99 {
							break
						}
						continue
					}
					select {
					case err := <-done:
						if err != nil {
							b.Fatal(err)
						}
						done = nil
					default:
					}
					if done == nil {
						break
					}
				}
				if done != nil {
					if err := <-done; err != nil {
						b.Fatal(err)
					}
				}
			}
			slices.Sort(lat)
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
			b.ReportMetric(us(lat[len(lat)/2]), "commit-p50-us")
			b.ReportMetric(us(lat[len(lat)*99/100]), "commit-p99-us")
			b.ReportMetric(us(lat[len(lat)-1]), "commit-max-us")
			b.ReportMetric(float64(len(lat))/float64(b.N), "commits/op")
		})
	}
}
