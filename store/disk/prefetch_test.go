package disk

import (
	"slices"
	"testing"
)

func TestTablesToPrefetch(t *testing.T) {
	files := []tableFile{
		{"000004.sst", 40}, {"MANIFEST-000001", 5}, {"000005.log", 10},
		{"000006.sst", 100}, // more than what is left of the budget: skipped
		{"000007.sst", 50}, {"000008.sst", 10}, {"000009.sst", 1},
	}
	if got, want := tablesToPrefetch(files, 100), []string{"000004.sst", "000007.sst", "000008.sst"}; !slices.Equal(got, want) {
		t.Fatalf("budget 100: %q, want %q", got, want)
	}
	if got := tablesToPrefetch(files, 0); len(got) != 0 {
		t.Fatalf("budget 0: %q, want none", got)
	}
	if got, want := tablesToPrefetch(files, 1<<30), []string{"000004.sst", "000006.sst", "000007.sst", "000008.sst", "000009.sst"}; !slices.Equal(got, want) {
		t.Fatalf("large budget: %q, want %q", got, want)
	}
}
