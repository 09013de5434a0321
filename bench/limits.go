package bench

import "slices"

// FilesNeeded estimates the file descriptors the benchmark's clients hold
// at once for cfg: each simulated member or committer is one kgo client
// with up to three connections (bootstrap, coordinator, join/sync).
func FilesNeeded(cfg Config) int {
	most := cfg.HeartbeatMembers
	if len(cfg.Members) > 0 {
		most = max(most, slices.Max(cfg.Members)+1)
	}
	if len(cfg.Committers) > 0 {
		most = max(most, slices.Max(cfg.Committers))
	}
	return 3*most + 64
}
