package main

import (
	"strings"
	"testing"
)

// TestHTTPListenAlias: --metrics-listen (and COHORT_METRICS_LISTEN), the
// old name of --http-listen, still sets the HTTP listener; both with
// different addresses is an error.
func TestHTTPListenAlias(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		want    string
		wantErr string
	}{
		{args: []string{"--http-listen", "127.0.0.1:9100"}, want: "127.0.0.1:9100"},
		{args: []string{"--metrics-listen", "127.0.0.1:9101"}, want: "127.0.0.1:9101"},
		{env: map[string]string{"COHORT_METRICS_LISTEN": "127.0.0.1:9102"}, want: "127.0.0.1:9102"},
		{args: []string{"--metrics-listen", "127.0.0.1:9103", "--http-listen", "127.0.0.1:9103"}, want: "127.0.0.1:9103"},
		{args: []string{"--metrics-listen", "127.0.0.1:9104", "--http-listen", "127.0.0.1:9105"}, wantErr: "set only --http-listen"},
		{args: nil, want: ""},
	} {
		lookup := noEnv
		if tc.env != nil {
			lookup = func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		}
		s := newServeFlags()
		err := s.parse(tc.args, lookup)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || s.httpListen != tc.want {
			t.Errorf("%v %v: http listen %q (%v), want %q", tc.args, tc.env, s.httpListen, err, tc.want)
		}
	}
}
