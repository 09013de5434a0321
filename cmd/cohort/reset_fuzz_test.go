package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseDuration: --by-duration either is refused or is the duration it
// spells. For the ISO-8601 form the oracle adds the terms in float64, where
// nothing wraps: a duration past what time.Duration holds must be refused,
// not wrapped around to a small one.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90m", "1h30m", "P1D", "PT1H30M", "P1DT12H", "pt1.5s", "P", "-1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			if d != 0 {
				t.Fatalf("%q refused (%v) as %s", s, err, d)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("%q taken as %s, not positive", s, d)
		}
		if gd, gerr := time.ParseDuration(s); gerr == nil {
			if gd != d {
				t.Fatalf("%q taken as %s, Go reads %s", s, d, gd)
			}
			return
		}
		m := isoDuration.FindStringSubmatch(strings.ToUpper(s))
		if m == nil {
			t.Fatalf("%q taken as %s, yet it is neither form", s, d)
		}
		sum := 0.0
		for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
			if m[i+1] != "" {
				v, _ := strconv.ParseFloat(m[i+1], 64)
				sum += v * float64(unit)
			}
		}
		if sum >= math.MaxInt64 {
			t.Fatalf("%q (%g ns, past time.Duration) taken as %s", s, sum, d)
		}
		if diff := math.Abs(float64(d) - sum); diff > 4+sum*1e-15 {
			t.Fatalf("%q taken as %s, it spells %g ns", s, d, sum)
		}
	})
}
