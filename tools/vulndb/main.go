// Command vulndb turns the OSV files of the golang.org/x/vulndb module
// into the database layout govulncheck reads with -db file:///DIR, so that
// CI can check cohort's dependencies and toolchain against a pinned copy of
// the Go vulnerability database, fetched from the Go module proxy, without
// reaching vuln.go.dev.
//
// Usage:
//
//	vulndb -osv $(go env GOMODCACHE)/golang.org/x/vulndb@VERSION/data/osv -out DIR
//
// The layout written: DIR/ID/<id>.json (each entry as it is), and
// DIR/index/db.json ({"modified": the newest entry's time}) and
// DIR/index/modules.json (for each module path, the ids that name it).
// The index leaves out the "fixed" hint, so govulncheck reads every entry of
// a module it uses and decides from the entry's full version ranges.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	osvDir := flag.String("osv", "", "directory of OSV entries (golang.org/x/vulndb's data/osv)")
	out := flag.String("out", "", "directory to write the database to (created)")
	flag.Parse()
	if *osvDir == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: vulndb -osv DIR -out DIR")
		os.Exit(2)
	}
	n, err := build(*osvDir, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(1)
	}
	fmt.Printf("vulndb: %d entries written to %s\n", n, *out)
}

// entry is the part of an OSV entry the index needs.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"affected"`
}

type indexVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
}

type indexModule struct {
	Path  string      `json:"path"`
	Vulns []indexVuln `json:"vulns"`
}

// build writes the database of the entries in osvDir into out and returns
// how many entries it holds.
func build(osvDir, out string) (int, error) {
	files, err := filepath.Glob(filepath.Join(osvDir, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OSV entries in %s", osvDir)
	}
	if err := os.MkdirAll(filepath.Join(out, "ID"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(out, "index"), 0o755); err != nil {
		return 0, err
	}
	var newest time.Time
	byModule := map[string][]indexVuln{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if e.ID == "" || strings.ContainsAny(e.ID, `/\`) || e.ID+".json" != filepath.Base(f) {
			return 0, fmt.Errorf("%s: entry id %q does not match its file name", f, e.ID)
		}
		if len(e.Affected) == 0 {
			return 0, fmt.Errorf("%s: no affected module", f)
		}
		if e.Modified.After(newest) {
			newest = e.Modified
		}
		seen := map[string]bool{}
		for _, a := range e.Affected {
			p := a.Package.Name
			if p == "" {
				return 0, fmt.Errorf("%s: an affected module without a path", f)
			}
			if !seen[p] {
				seen[p] = true
				byModule[p] = append(byModule[p], indexVuln{ID: e.ID, Modified: e.Modified})
			}
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), raw, 0o644); err != nil {
			return 0, err
		}
	}
	mods := make([]indexModule, 0, len(byModule))
	for p, vs := range byModule {
		slices.SortFunc(vs, func(a, b indexVuln) int { return strings.Compare(a.ID, b.ID) })
		mods = append(mods, indexModule{Path: p, Vulns: vs})
	}
	slices.SortFunc(mods, func(a, b indexModule) int { return strings.Compare(a.Path, b.Path) })
	if err := writeJSON(filepath.Join(out, "index", "modules.json"), mods); err != nil {
		return 0, err
	}
	if err := writeJSON(filepath.Join(out, "index", "db.json"), map[string]time.Time{"modified": newest}); err != nil {
		return 0, err
	}
	return len(files), nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
