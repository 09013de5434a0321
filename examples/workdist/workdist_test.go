package workdist_test

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/examples/workdist"
)

func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		"127.0.0.1:9092": {"127.0.0.1:9092"},
		"127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094": {"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"},
		" a:1 , b:2 ,":   {"a:1", "b:2"},
		",,a:1,,":        {"a:1"},
		"[::1]:9092,b:2": {"[::1]:9092", "b:2"},
		"":               nil,
		" , ":            nil,
	} {
		if got := workdist.SplitList(in); !slices.Equal(got, want) {
			t.Errorf("SplitList(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseBootstrap(t *testing.T) {
	parse := func(args ...string) (workdist.Config, error) {
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return workdist.Parse(fs, args, "w")
	}
	c, err := parse("-bootstrap", "127.0.0.1:9092, 127.0.0.1:9093,127.0.0.1:9094", "-group", "g")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"}; !slices.Equal(c.Bootstrap, want) || c.Group != "g" || c.ClientID != "w" {
		t.Errorf("got bootstrap %q, group %q, client id %q; want %q, g, w", c.Bootstrap, c.Group, c.ClientID, want)
	}
	if c, err := parse(); err != nil || !slices.Equal(c.Bootstrap, []string{"127.0.0.1:9092"}) {
		t.Errorf("default: got %q, %v; want [127.0.0.1:9092]", c.Bootstrap, err)
	}
	if _, err := parse("-bootstrap", " , "); err == nil {
		t.Error("-bootstrap ' , ' was accepted")
	}
}
