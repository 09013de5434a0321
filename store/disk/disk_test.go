package disk

import (
	"log/slog"
	"testing"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/storetest"
)

func openT(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", opts.Dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openT(t, Options{Dir: t.TempDir()}) })
}

func TestPersistent(t *testing.T) {
	storetest.RunPersistent(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store { return openT(t, Options{Dir: dir}) }
	})
}

// discard is the logger of stores in tests.
var discard = slog.New(slog.DiscardHandler)
