package testpar

import (
	"flag"
	"testing"
)

func flags(def int, args ...string) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Int("test.parallel", def, "")
	if err := fs.Parse(args); err != nil {
		panic(err)
	}
	return fs
}

func TestRaise(t *testing.T) {
	for _, tc := range []struct {
		name string
		def  int
		args []string
		n    int
		want string
	}{
		{"default below n is raised", 2, nil, 4, "4"},
		{"default at n is kept", 4, nil, 4, "4"},
		{"default above n is kept", 8, nil, 4, "8"},
		{"explicit below n is kept", 2, []string{"-test.parallel=1"}, 4, "1"},
		{"explicit above n is kept", 2, []string{"-test.parallel=16"}, 4, "16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flags(tc.def, tc.args...)
			raise(fs, tc.n)
			if got := fs.Lookup("test.parallel").Value.String(); got != tc.want {
				t.Errorf("test.parallel = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestRaiseWithoutFlag: a flag set without test.parallel is left alone.
func TestRaiseWithoutFlag(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	raise(fs, 4)
	if fs.Lookup("test.parallel") != nil {
		t.Fatal("raise defined test.parallel")
	}
}
