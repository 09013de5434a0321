//go:build !unix

package bench

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE.
func RaiseFileLimit(need int) error { return nil }
