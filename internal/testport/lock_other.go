//go:build !unix

package testport

// lockPort: no cross-process lock here; the listen check alone.
func lockPort(int) bool { return true }
