package assign

// DefaultRedundantReplicas is the replica count of the "redundant" assignor
// that ByName returns.
const DefaultRedundantReplicas = 2

// ByName returns the assignor of this package announced under the given
// protocol name, for configuration that names assignors by string. The
// parameterised ones come with defaults: "copartition" has no co-partitioned
// sets (it then assigns like range; build it with Copartition to configure
// sets) and "redundant" uses DefaultRedundantReplicas and slog.Default().
// The assignors of package sticky (sticky, cooperative-sticky) are not
// listed, since that package imports this one: package
// consumer/assign/assignors has a ByName that knows them all.
func ByName(name string) (Assignor, bool) {
	switch name {
	case RangeName:
		return Range(), true
	case RoundRobinName:
		return RoundRobin(), true
	case CopartitionName:
		return Copartition(), true
	case RedundantName:
		return Redundant(DefaultRedundantReplicas, nil), true
	case RackAwareName:
		return RackAware(), true
	}
	return nil, false
}

// Names lists the protocol names ByName knows, in a fixed order.
func Names() []string {
	return []string{RangeName, RoundRobinName, CopartitionName, RedundantName, RackAwareName}
}
