package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/cohort-dev/cohort/security/clientconfig"
)

// serveOtherEnv are the COHORT_ variables cohort reads that are no flag of
// cohort serve: the secrets (never flags, since any user of the machine
// reads a process's arguments) and the other commands' --bootstrap, which
// an environment file shared with the CLI may well hold.
var serveOtherEnv = []string{
	"COHORT_BOOTSTRAP_PASSWORD", // serve --bootstrap-user
	"COHORT_ETCD_PASSWORD",      // serve --etcd-user
	"COHORT_BOOTSTRAP",          // the other commands' --bootstrap
	clientconfig.PasswordEnv,    // the other commands' SASL password
}

// testEnvPrefixes start the variables of cohort's own tests and benchmarks.
// Some of them run cohort serve as a child process that inherits them.
var testEnvPrefixes = []string{"COHORT_TEST_", "COHORT_BENCH", "COHORT_SIM_", "COHORT_LOAD_CHILD_", "COHORT_CONSOLE_CHILD", "COHORT_ARTIFACTS"}

// knownServeEnv reports whether cohort serve (or another part of cohort)
// reads the variable name: a flag's, one of serveOtherEnv, or a test's.
func knownServeEnv(fs *flag.FlagSet, name string) bool {
	if flagOfEnv(fs, name) != nil || slices.Contains(serveOtherEnv, name) {
		return true
	}
	return slices.ContainsFunc(testEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// flagOfEnv is the flag whose variable is name, or nil.
func flagOfEnv(fs *flag.FlagSet, name string) *flag.Flag {
	var found *flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if envName(f.Name) == name {
			found = f
		}
	})
	return found
}

// checkServeEnv refuses a COHORT_ variable in environ (KEY=VALUE entries)
// that cohort serve would not read: a misspelt setting (COHORT_LISTENER for
// COHORT_LISTENERS) would otherwise leave the node on its default, which for
// a security setting is an open node. The error names each such variable
// and the flag it most likely meant, never a value (it may be a secret).
func checkServeEnv(fs *flag.FlagSet, environ []string) error {
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "COHORT_") || knownServeEnv(fs, name) || slices.Contains(unknown, name) {
			continue
		}
		unknown = append(unknown, name)
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	var parts []string
	for _, name := range unknown {
		part := "$" + name
		switch v, f := closestEnv(fs, name); {
		case f != nil:
			part += fmt.Sprintf(" (did you mean %s, --%s?)", v, f.Name)
		case v != "":
			part += fmt.Sprintf(" (did you mean %s?)", v)
		}
		parts = append(parts, part)
	}
	what := "is not a setting"
	if len(unknown) > 1 {
		what = "are not settings"
	}
	return usagef("%s %s of cohort serve: refusing to start with a setting it would ignore "+
		"(cohort serve -h lists every variable; unset it or correct its name)", strings.Join(parts, ", "), what)
}

// closestEnv is the variable cohort serve reads that is nearest to name by
// edit distance (with and without the underscores), and its flag if it has
// one; "" if none is near enough to be what was meant.
func closestEnv(fs *flag.FlagSet, name string) (string, *flag.Flag) {
	candidates := slices.Clone(serveOtherEnv[:2]) // serve's own secrets
	fs.VisitAll(func(f *flag.Flag) { candidates = append(candidates, envName(f.Name)) })
	key := strings.TrimPrefix(name, "COHORT_")
	best, bestDist := "", 0
	for _, c := range candidates {
		ck := strings.TrimPrefix(c, "COHORT_")
		d := min(editDistance(key, ck),
			editDistance(strings.ReplaceAll(key, "_", ""), strings.ReplaceAll(ck, "_", "")))
		if best == "" || d < bestDist {
			best, bestDist = c, d
		}
	}
	// A third of the name's length, at least 1 and at most 3: close
	// enough to be a typo, far enough not to suggest an unrelated setting.
	if best == "" || bestDist > min(3, max(1, len(key)/3)) {
		return "", nil
	}
	return best, flagOfEnv(fs, best)
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
