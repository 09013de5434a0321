package main

import (
	"strings"
	"testing"
)

// TestCLIWarnsOfFlagVariablesItIgnores: cohort serve takes every flag from
// a COHORT_ variable, so an operator set COHORT_TLS, COHORT_TLS_CA_FILE,
// COHORT_SASL_MECHANISM and COHORT_SASL_USERNAME for the CLI as well. The
// other commands read only $COHORT_BOOTSTRAP and $COHORT_SASL_PASSWORD; they
// ignored the rest without a word and then failed to connect with a hint
// about missing TLS. Each variable named after one of the command's flags
// now gets a warning naming the flag to give instead (never the value); the
// variables the command does read, and empty ones, get none.
func TestCLIWarnsOfFlagVariablesItIgnores(t *testing.T) {
	// The names as the code derives them from the flags (cohort serve
	// refuses these variables, so no literal of them may appear in the
	// code: TestServeEnvKnowsCohortVariables).
	t.Setenv(envName("sasl-username"), "user-value-3b1")
	t.Setenv(envName("tls"), "true")
	t.Setenv(envName("output"), "")
	t.Setenv(envName("bootstrap"), closedAddr(t))
	c := cli{t: t}
	_, errOut, code := c.run("topics", "--timeout", "200ms")
	if code != 1 {
		t.Fatalf("topics against a closed address: exit %d, want 1\n%s", code, errOut)
	}
	for _, want := range []string{
		"cohort: warning: $COHORT_SASL_USERNAME is not read by cohort topics: give --sasl-username",
		"cohort: warning: $COHORT_TLS is not read by cohort topics: give --tls",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	for _, not := range []string{"user-value-3b1", "$COHORT_BOOTSTRAP is not read", "$" + envName("output")} {
		if strings.Contains(errOut, not) {
			t.Errorf("stderr holds %q:\n%s", not, errOut)
		}
	}
	// A family's command (flags parsed twice, first with every action's)
	// warns once.
	_, errOut, _ = c.run("group", "describe", "g", "--timeout", "200ms")
	if n := strings.Count(errOut, "$COHORT_TLS is not read by cohort group describe"); n != 1 {
		t.Errorf("group describe warned %d times of $COHORT_TLS, want once:\n%s", n, errOut)
	}
}
