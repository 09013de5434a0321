package cluster

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// NoUserHint says what to do when err is etcd refusing a client that sent
// no user (etcd has authentication enabled, the node was started without
// an etcd user), and is "" for any other error. A node gets that refusal at
// start, and while it runs once etcd's authentication is turned on: both
// say the same.
func NoUserHint(err error) string {
	if errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrInvalidAuthToken) || errors.Is(err, rpctypes.ErrInvalidAuthMgmt) {
		return "etcd has authentication enabled: give it an etcd user: --etcd-user, with the password in --etcd-password-file or COHORT_ETCD_PASSWORD"
	}
	return ""
}
