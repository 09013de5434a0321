package storetest_test

import (
	"testing"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
	"github.com/cohort-dev/cohort/store/storetest"
)

func TestMemstore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
}
