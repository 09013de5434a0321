package group

// GroupStats calls fn once per group of the shard (Dead groups left out) with
// its type ("classic" or "consumer"), its state as ListGroups names it, and
// its number of members. It allocates nothing; metrics count groups and
// members with it at scrape time, under the same serialisation as every
// other call on the shard.
func (s *Shard) GroupStats(fn func(groupType, state string, members int)) {
	for _, g := range s.groups {
		if g.state == Dead {
			continue
		}
		if g.cg != nil {
			fn("consumer", g.cg.state(), len(g.cg.members))
			continue
		}
		fn("classic", g.state.String(), len(g.members))
	}
}
