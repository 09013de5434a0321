package server

import (
	"time"
)

// sweepIdleLoop runs sweepIdle every tenth of ConnectionsMaxIdle (at least
// every 100 ms, at most every 30 s) until the server closes.
func (s *Server) sweepIdleLoop() {
	every := min(max(s.cfg.ConnectionsMaxIdle/10, 100*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case <-t.C:
			s.sweepIdle(s.cfg.Now())
		}
	}
}

// sweepIdle advances the idle clock to now and closes the connections from
// listeners that have been idle (no complete request, none being answered)
// for longer than ConnectionsMaxIdle; it returns how many it closed. A
// connection's idle start is stamped with the clock of the previous sweep,
// so one is closed after between 0.9 and 1.1 times the period.
func (s *Server) sweepIdle(now time.Time) int {
	s.idleClock.Store(now.UnixNano())
	limit := now.Add(-s.cfg.ConnectionsMaxIdle).UnixNano()
	var idle []*conn
	s.mu.Lock()
	for c := range s.conns {
		if since := c.idleSince.Load(); c.external && since != 0 && since < limit && c.ctx.Err() == nil {
			idle = append(idle, c)
		}
	}
	s.mu.Unlock()
	for _, c := range idle {
		// s.log, not c.logger(): the client software it adds is the
		// connection goroutine's to change (noteSoftware).
		s.log.Debug("closing idle connection", "remote", c.nc.RemoteAddr().String(), "listener", c.l.Name,
			"idle_since", time.Unix(0, c.idleSince.Load()).UTC(), "max_idle", s.cfg.ConnectionsMaxIdle)
		c.close()
	}
	return len(idle)
}
