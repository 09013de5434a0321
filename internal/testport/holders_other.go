//go:build !linux

package testport

// Listeners cannot tell here (no /proc): known is false.
func Listeners(addr string) (pids []int, known bool) { return nil, false }

// Holders cannot tell here which process holds a port (no /proc).
func Holders(addr string) string {
	return "which process holds " + addr + " is not known on this system"
}
