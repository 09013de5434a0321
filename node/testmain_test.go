package node

import (
	"os"
	"testing"

	"github.com/cohort-dev/cohort/internal/testbin"
)

// TestMain removes the commands testbin built for the tests once they end.
func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }
