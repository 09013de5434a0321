package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeOSV(t *testing.T, dir, id, modified string, modules ...string) {
	t.Helper()
	var affected []string
	for _, m := range modules {
		affected = append(affected, `{"package":{"name":"`+m+`","ecosystem":"Go"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.2.3"}]}]}`)
	}
	body := `{"schema_version":"1.3.1","id":"` + id + `","modified":"` + modified + `","affected":[` + strings.Join(affected, ",") + `]}`
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBuild: every entry is copied as it is, each module lists the entries
// that name it (once each, even when an entry names it in two ranges), and
// db.json carries the newest entry's time.
func TestBuild(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	writeOSV(t, src, "GO-2026-0002", "2026-11-02T00:00:00Z", "stdlib", "golang.org/x/net", "stdlib")
	writeOSV(t, src, "GO-2026-0001", "2026-11-05T10:00:00Z", "golang.org/x/net")
	n, err := build(src, out)
	if err != nil || n != 2 {
		t.Fatalf("build: %d, %v", n, err)
	}
	for _, id := range []string{"GO-2026-0001", "GO-2026-0002"} {
		a, _ := os.ReadFile(filepath.Join(src, id+".json"))
		b, err := os.ReadFile(filepath.Join(out, "ID", id+".json"))
		if err != nil || string(a) != string(b) {
			t.Errorf("%s not copied as it is: %v", id, err)
		}
	}
	var mods []indexModule
	raw, err := os.ReadFile(filepath.Join(out, "index", "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &mods); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, m := range mods {
		for _, v := range m.Vulns {
			got[m.Path] = append(got[m.Path], v.ID)
		}
	}
	if strings.Join(got["stdlib"], ",") != "GO-2026-0002" || strings.Join(got["golang.org/x/net"], ",") != "GO-2026-0001,GO-2026-0002" || len(got) != 2 {
		t.Errorf("modules index %v", got)
	}
	if strings.Contains(string(raw), "fixed") {
		t.Errorf("the index carries a fixed hint: %s", raw)
	}
	var db struct{ Modified time.Time }
	raw, _ = os.ReadFile(filepath.Join(out, "index", "db.json"))
	if err := json.Unmarshal(raw, &db); err != nil || !db.Modified.Equal(time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("db.json %s (%v)", raw, err)
	}
}

func TestBuildRefusesBadInput(t *testing.T) {
	empty := t.TempDir()
	if _, err := build(empty, t.TempDir()); err == nil {
		t.Error("an empty directory built a database")
	}
	misnamed := t.TempDir()
	writeOSV(t, misnamed, "GO-2026-0003", "2026-11-01T00:00:00Z", "stdlib")
	if err := os.Rename(filepath.Join(misnamed, "GO-2026-0003.json"), filepath.Join(misnamed, "GO-2026-0004.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := build(misnamed, t.TempDir()); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("an entry under another id's name: %v", err)
	}
	noModule := t.TempDir()
	writeOSV(t, noModule, "GO-2026-0005", "2026-11-01T00:00:00Z")
	if _, err := build(noModule, t.TempDir()); err == nil {
		t.Error("an entry naming no module built a database")
	}
}
