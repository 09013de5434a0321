package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestString: the line names the version, the revision, its time, a
// modified tree and the Go release, and says what the build does not know.
func TestString(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"checkout, modified", &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Version: "v0.0.0-20260501100000-c7f2016a4b1e+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "c7f2016a4b1e0000000000000000000000000000"},
				{Key: "vcs.time", Value: "2026-05-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"cohort v0.0.0-20260501100000-c7f2016a4b1e+dirty (revision c7f2016a4b1e0000000000000000000000000000, 2026-05-01T10:00:00Z, modified) go1.27.3"},
		{"checkout, clean", &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "2026-05-01T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"cohort (devel) (revision abc, 2026-05-01T10:00:00Z) go1.27.3"},
		{"go install module@version", &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Version: "v1.4.0"}},
			"cohort v1.4.0 (revision unknown) go1.27.3"},
		{"nothing embedded", nil, "cohort (devel) (revision unknown) " + runtime.Version()},
	} {
		if got := fromBuildInfo(tc.bi).String(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestInfo: Info and String read the running binary's own build info.
func TestInfo(t *testing.T) {
	version, revision, modified := Info()
	s := String()
	if version == "" || !strings.HasPrefix(s, "cohort "+version+" (") || !strings.HasSuffix(s, ") "+runtime.Version()) {
		t.Fatalf("Info() = %q, %q, %v; String() = %q", version, revision, modified, s)
	}
	if revision != "" && !strings.Contains(s, "revision "+revision) {
		t.Fatalf("String() %q lacks revision %q", s, revision)
	}
}
