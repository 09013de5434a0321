package server

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// Decoding a request costs far more memory than its bytes on the wire where
// it lists many tiny entries: kmsg turns each into a Go struct or string
// header (an empty topic name, 2 bytes in Metadata v4, becomes a 40-byte
// struct) and keeps every unknown tagged field in a map (an 8 MB Heartbeat
// of two million empty tags took 335 MB to decode and answer; an 8 MB
// Metadata v4 of empty names 412 MB). Requests that big are rare and never
// urgent, so the server lets large ones through a shared budget: a request
// frame over largeRequestBytes is decoded and answered only while the
// frames of such requests being served add up to at most the budget
// (Config.MaxInflightRequestBytes); a frame larger than the whole budget is
// served alone. Smaller requests, every heartbeat and ordinary commit, never
// wait. A request that may park for long (JoinGroup, SyncGroup) gives its
// share back once decoded, so members waiting for each other never hold it.
// The frame itself is read before the budget is asked for, so a client that
// sends slowly holds none; frames being read are bounded by the connection
// limits and --max-request-bytes, as in Kafka.

// largeRequestBytes is the smallest frame that takes a share of the budget:
// the largest frame read into a buffer of its announced size at once.
const largeRequestBytes = 64 << 10

// DefaultMaxInflightRequestBytes is the default budget of large request
// frames served at once.
const DefaultMaxInflightRequestBytes = 16 << 20

// requestBudget is the budget; nil means no limit.
type requestBudget struct {
	sem  *semaphore.Weighted
	size int64
}

func newRequestBudget(size int64) *requestBudget {
	if size <= 0 {
		return nil
	}
	return &requestBudget{sem: semaphore.NewWeighted(size), size: size}
}

// acquire takes n bytes of the budget (all of it if n exceeds it) and
// returns what was taken, for release: 0 for a small frame or no budget.
// waiting, if not nil, is called before it starts to wait.
func (b *requestBudget) acquire(ctx context.Context, n int64, waiting func()) (int64, error) {
	if b == nil || n <= largeRequestBytes {
		return 0, nil
	}
	n = min(n, b.size)
	if b.sem.TryAcquire(n) {
		return n, nil
	}
	if waiting != nil {
		waiting()
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	return n, nil
}

func (b *requestBudget) release(n int64) {
	if n > 0 {
		b.sem.Release(n)
	}
}
