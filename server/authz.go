package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleAuthorized answers r after checking the principal's permissions
// (see docs/security.md for the table of checks).
func (s *Server) handleAuthorized(ctx context.Context, c Client, r *request) (kmsg.Response, error) {
	// TODO(authz): per-API checks.
	return s.handleUnchecked(ctx, c, r)
}
