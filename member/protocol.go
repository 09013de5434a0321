package member

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/clock"
)

// joinAndSync runs JoinGroup and SyncGroup until the member holds a synced
// generation. It retries what can be retried and returns an error only when
// the member is closing or a *FatalError occurred.
func (m *Member) joinAndSync(b *backoff) (Generation, error) {
	for {
		if err := m.ctx.Err(); err != nil {
			return Generation{}, err
		}
		m.deliverLost()
		m.mu.Lock()
		id := m.memberID
		m.rejoin = false
		m.mu.Unlock()

		protos := m.cfg.Protocols()
		sent := m.clk.Now()
		jr, err := m.joinOnce(id, protos)
		if err != nil {
			if m.ctx.Err() != nil {
				return Generation{}, m.ctx.Err()
			}
			m.log.Debug("JoinGroup failed", "err", err)
			if !m.wait(b.next()) {
				return Generation{}, m.ctx.Err()
			}
			continue
		}
		switch code := jr.ErrorCode; code {
		case 0:
		case kerr.MemberIDRequired.Code:
			m.mu.Lock()
			m.memberID = jr.MemberID
			m.mu.Unlock()
			continue
		case kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code:
			m.mu.Lock()
			m.loseLocked(kerr.ErrorForCode(code), code == kerr.UnknownMemberID.Code)
			m.mu.Unlock()
			continue
		case kerr.FencedInstanceID.Code, kerr.InconsistentGroupProtocol.Code, kerr.GroupMaxSizeReached.Code,
			kerr.InvalidSessionTimeout.Code, kerr.InvalidGroupID.Code, kerr.GroupAuthorizationFailed.Code,
			kerr.UnsupportedVersion.Code:
			return Generation{}, &FatalError{Request: "JoinGroup", Err: kerr.ErrorForCode(code)}
		default:
			// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
			// COORDINATOR_LOAD_IN_PROGRESS (after kgo's own retries),
			// REBALANCE_IN_PROGRESS and anything unexpected: back off.
			m.log.Debug("JoinGroup error, retrying", "err", kerr.ErrorForCode(code))
			if !m.wait(b.next()) {
				return Generation{}, m.ctx.Err()
			}
			continue
		}

		g := Generation{
			ID:         jr.Generation,
			MemberID:   jr.MemberID,
			InstanceID: m.cfg.InstanceID,
			LeaderID:   jr.LeaderID,
			Leader:     jr.LeaderID == jr.MemberID,
		}
		if jr.Protocol != nil {
			g.Protocol = *jr.Protocol
		}
		if g.Leader {
			for _, mm := range jr.Members {
				gm := GroupMember{ID: mm.MemberID, Metadata: mm.ProtocolMetadata}
				if mm.InstanceID != nil {
					gm.InstanceID = *mm.InstanceID
				}
				g.Members = append(g.Members, gm)
			}
		}
		m.mu.Lock()
		m.memberID = jr.MemberID
		m.gen = g
		m.refreshLocked(sent)
		// The coordinator drops members that have not synced within the
		// rebalance timeout of the join's completion (no earlier than sent).
		m.phaseLimit = sent.Add(m.cfg.RebalanceTimeout)
		m.mu.Unlock()
		m.pokeWatchdog()

		var assignments map[string][]byte
		if g.Leader && !jr.SkipAssignment {
			actx, cancel := context.WithTimeout(m.ctx, m.cfg.RebalanceTimeout)
			assignments, err = m.cfg.Assign(actx, g)
			cancel()
			if err != nil {
				// Rejoining in CompletingRebalance answers at once with
				// the same generation, so the leader simply tries again.
				m.log.Error("assign failed; retrying", "generation", g.ID, "err", err)
				if !m.wait(b.next()) {
					return Generation{}, m.ctx.Err()
				}
				continue
			}
		}

		sent = m.clk.Now()
		sr, err := m.syncOnce(g, assignments)
		if err != nil {
			if m.ctx.Err() != nil {
				return Generation{}, m.ctx.Err()
			}
			m.log.Debug("SyncGroup failed", "err", err)
			if !m.wait(b.next()) {
				return Generation{}, m.ctx.Err()
			}
			continue
		}
		switch code := sr.ErrorCode; code {
		case 0:
		case kerr.RebalanceInProgress.Code:
			continue
		case kerr.UnknownMemberID.Code, kerr.IllegalGeneration.Code:
			m.mu.Lock()
			m.loseLocked(kerr.ErrorForCode(code), code == kerr.UnknownMemberID.Code)
			m.mu.Unlock()
			continue
		case kerr.FencedInstanceID.Code, kerr.InconsistentGroupProtocol.Code, kerr.GroupAuthorizationFailed.Code:
			return Generation{}, &FatalError{Request: "SyncGroup", Err: kerr.ErrorForCode(code)}
		default:
			m.log.Debug("SyncGroup error, rejoining", "err", kerr.ErrorForCode(code))
			if !m.wait(b.next()) {
				return Generation{}, m.ctx.Err()
			}
			continue
		}
		g.Assignment = sr.MemberAssignment
		m.mu.Lock()
		m.gen = g
		m.refreshLocked(sent)
		if sent.After(m.lastOK) {
			m.lastOK = sent
		}
		m.mu.Unlock()
		b.reset()
		return g, nil
	}
}

func (m *Member) joinOnce(id string, protos []Protocol) (*kmsg.JoinGroupResponse, error) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = m.cfg.Group
	req.SessionTimeoutMillis = int32(m.cfg.SessionTimeout / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(m.cfg.RebalanceTimeout / time.Millisecond)
	req.MemberID = id
	if m.cfg.InstanceID != "" {
		inst := m.cfg.InstanceID
		req.InstanceID = &inst
	}
	req.ProtocolType = m.cfg.ProtocolType
	for _, p := range protos {
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name, jp.Metadata = p.Name, p.Metadata
		req.Protocols = append(req.Protocols, jp)
	}
	// A join parks until the rebalance completes: up to the (largest)
	// rebalance timeout, or the coordinator's initial delay.
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.RebalanceTimeout+m.cfg.SessionTimeout+5*time.Second)
	defer cancel()
	resp, err := m.cl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	jr, ok := resp.(*kmsg.JoinGroupResponse)
	if !ok {
		return nil, errors.New("member: unexpected JoinGroup response type")
	}
	return jr, nil
}

func (m *Member) syncOnce(g Generation, assignments map[string][]byte) (*kmsg.SyncGroupResponse, error) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group = m.cfg.Group
	req.Generation = g.ID
	req.MemberID = g.MemberID
	if m.cfg.InstanceID != "" {
		inst := m.cfg.InstanceID
		req.InstanceID = &inst
	}
	pt, pn := m.cfg.ProtocolType, g.Protocol
	req.ProtocolType, req.Protocol = &pt, &pn
	for id, a := range assignments {
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, sa)
	}
	// Followers park until the leader syncs (at most the rebalance timeout).
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.RebalanceTimeout+5*time.Second)
	defer cancel()
	resp, err := m.cl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	sr, ok := resp.(*kmsg.SyncGroupResponse)
	if !ok {
		return nil, errors.New("member: unexpected SyncGroup response type")
	}
	return sr, nil
}

// refreshLocked records that the coordinator confirmed this member for a
// request sent at sent: the coordinator re-armed the session no earlier.
func (m *Member) refreshLocked(sent time.Time) {
	if until := sent.Add(m.cfg.SessionTimeout); until.After(m.aliveUntil) {
		m.aliveUntil = until
	}
}

// heartbeatLoop heartbeats every HeartbeatInterval whenever the member has a
// generation, independently of the main loop and the caller's callbacks.
func (m *Member) heartbeatLoop() {
	defer m.wg.Done()
	t := m.clk.NewTimer(m.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-m.hbDone:
			return
		case <-t.C():
		}
		m.mu.Lock()
		id, gen := m.memberID, m.gen.ID
		m.mu.Unlock()
		next := m.cfg.HeartbeatInterval
		if id != "" && gen >= 0 {
			sent := m.clk.Now()
			code, err := m.heartbeat(id, gen)
			m.onHeartbeat(id, gen, sent, code, err)
			next -= m.clk.Now().Sub(sent)
		}
		t.Reset(max(next, 0))
	}
}

func (m *Member) heartbeat(id string, gen int32) (int16, error) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = m.cfg.Group
	req.Generation = gen
	req.MemberID = id
	if m.cfg.InstanceID != "" {
		inst := m.cfg.InstanceID
		req.InstanceID = &inst
	}
	// One interval per attempt: a heartbeat that hangs must not hold back
	// the next one (kgo retries inside this bound).
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.HeartbeatInterval)
	defer cancel()
	resp, err := m.cl.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	hr, ok := resp.(*kmsg.HeartbeatResponse)
	if !ok {
		return 0, errors.New("member: unexpected Heartbeat response type")
	}
	return hr.ErrorCode, nil
}

func (m *Member) onHeartbeat(id string, gen int32, sent time.Time, code int16, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != m.memberID || gen != m.gen.ID {
		return // answers for a generation we already left
	}
	if err != nil {
		m.log.Debug("heartbeat failed", "generation", gen, "err", err)
		return
	}
	switch code {
	case 0:
		m.refreshLocked(sent)
		if m.stable && sent.After(m.lastOK) {
			m.lastOK = sent
		}
	case kerr.RebalanceInProgress.Code:
		// The coordinator re-arms the session in PreparingRebalance.
		m.refreshLocked(sent)
		if m.stable {
			m.log.Debug("rebalance in progress", "generation", gen)
			m.rejoin = true
			if m.phaseLimit.IsZero() && !m.lastOK.IsZero() {
				m.phaseLimit = m.lastOK.Add(m.cfg.RebalanceTimeout)
			}
			if !m.cfg.Cooperative {
				m.dropWorkLocked(ErrRevoked)
			}
			m.pokeWatchdog()
			m.poke()
		}
	case kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		// While rejoining, the join's answer decides; when stable, the
		// generation is over for us.
		if m.stable {
			m.loseLocked(kerr.ErrorForCode(code), code == kerr.UnknownMemberID.Code)
		}
	default:
		m.log.Debug("heartbeat error", "generation", gen, "err", kerr.ErrorForCode(code))
	}
}

// watchdog declares the membership lost when the coordinator could soon
// remove this member: LostMargin before the session could expire (measured
// from the send time of the last confirmed request) or, while rebalancing,
// before the rebalance timeout could drop it.
func (m *Member) watchdog() {
	defer m.wg.Done()
	for {
		m.mu.Lock()
		var d time.Duration
		armed := m.holding
		if armed {
			deadline := m.aliveUntil
			if !m.phaseLimit.IsZero() && m.phaseLimit.Before(deadline) {
				deadline = m.phaseLimit
			}
			d = deadline.Add(-m.cfg.LostMargin).Sub(m.clk.Now())
			if d <= 0 {
				m.log.Warn("no confirmed heartbeat within the session; stopping work",
					"generation", m.gen.ID, "member", m.memberID)
				m.loseLocked(ErrSessionLost, false)
				m.mu.Unlock()
				continue
			}
		}
		m.mu.Unlock()
		var t clock.Timer
		var tc <-chan time.Time
		if armed {
			t = m.clk.NewTimer(d)
			tc = t.C()
		}
		select {
		case <-tc:
		case <-m.wdWake:
		case <-m.hbDone:
			if t != nil {
				t.Stop()
			}
			return
		}
		if t != nil {
			t.Stop()
		}
	}
}
