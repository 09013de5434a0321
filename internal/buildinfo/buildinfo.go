// Package buildinfo says which build of cohort is running: the module
// version, the VCS revision and time it was built from, whether the work
// tree had changes, and the Go release. `go build` in a git checkout embeds
// the vcs.* settings; `go install module@version` embeds the version.
// `cohort version` prints String, and a node can log or export the same.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info returns the module version ("(devel)" when the build does not
// know one), the VCS revision ("" when not built from a checkout) and
// whether the checkout had uncommitted changes.
func Info() (version, revision string, modified bool) {
	b := read()
	return b.version, b.revision, b.modified
}

// String is one line naming the build, such as
//
//	cohort v0.0.0-20260501100000-c7f2016a4b1e (revision c7f2016a4b1e..., 2026-05-01T10:00:00Z, modified) go1.27.3
//
// Parts the build does not know are left out, or said to be unknown.
func String() string { return read().String() }

// build is what the binary knows of itself.
type build struct {
	version, revision, time string
	modified                bool
	goVersion               string
}

func read() build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo extracts a build from bi (nil: none embedded).
func fromBuildInfo(bi *debug.BuildInfo) build {
	b := build{version: "(devel)", goVersion: runtime.Version()}
	if bi == nil {
		return b
	}
	if v := bi.Main.Version; v != "" {
		b.version = v
	}
	if bi.GoVersion != "" {
		b.goVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.time":
			b.time = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

func (b build) String() string {
	var vcs []string
	if b.revision != "" {
		vcs = append(vcs, "revision "+b.revision)
	} else {
		vcs = append(vcs, "revision unknown")
	}
	if b.time != "" {
		vcs = append(vcs, b.time)
	}
	if b.modified {
		vcs = append(vcs, "modified")
	}
	return "cohort " + b.version + " (" + strings.Join(vcs, ", ") + ") " + b.goVersion
}
