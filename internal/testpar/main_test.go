package testpar

import (
	"flag"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Default(4)
	os.Exit(m.Run())
}

// TestDefaultRunsFourAtOnce: in this test binary, whose TestMain calls
// Default(4), four parallel subtests run at the same time: each waits
// (bounded) until all four have started. With -parallel given on the
// command line that value is kept instead.
func TestDefaultRunsFourAtOnce(t *testing.T) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if explicit {
		t.Logf("-test.parallel given on the command line (%s): kept", flag.Lookup("test.parallel").Value)
		return
	}
	if got, _ := strconv.Atoi(flag.Lookup("test.parallel").Value.String()); got < 4 {
		t.Fatalf("test.parallel = %d, want at least 4", got)
	}
	var mu sync.Mutex
	started := 0
	all := make(chan struct{})
	for i := 0; i < 4; i++ {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			mu.Lock()
			started++
			if started == 4 {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				mu.Lock()
				defer mu.Unlock()
				t.Errorf("only %d of 4 parallel subtests running after 10s", started)
			}
		})
	}
}
