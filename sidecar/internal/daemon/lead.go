package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/dataenv/dataenv/sidecar/internal/dispatch"
	"github.com/dataenv/dataenv/sidecar/internal/expiry"
	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/leader"
	"github.com/dataenv/dataenv/sidecar/internal/replication"
	"github.com/dataenv/dataenv/sidecar/internal/rescuer"
	"github.com/dataenv/dataenv/sidecar/internal/retention"
)

// lead runs the leader's work until leadership is lost or ctx ends. On ctx's end (SIGTERM) it
// stops taking requests, lets running handlers finish within the grace period while the stream
// keeps confirming, then stops the stream, which sends a last status update.
func (s *Sidecar) lead(ctx context.Context, lease *leader.Lease, stepDown time.Duration) {
	leaseCtx, cancelLease := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLease()
	go func() {
		select {
		case <-lease.Lost():
			cancelLease()
		case <-leaseCtx.Done():
		}
	}()
	workCtx, cancelWork := context.WithCancel(leaseCtx)
	defer cancelWork()
	s.takeover(leaseCtx, stepDown)
	d := dispatch.New(dispatch.Config{Pool: s.pool, DSN: s.cfg.DSN, Instance: s.id,
		GateAppName: fence.SessionName(s.id, fence.RoleGate), Registry: s.cfg.Registry,
		Concurrency: s.cfg.Concurrency, RetryWindow: s.cfg.RetryWindow, Logger: s.cfg.Logger, Observer: s.cfg.Metrics,
		JobKinds: s.cfg.JobKinds, SchedulingKind: s.cfg.SchedulingKind, SchedulingOwner: s.cfg.SchedulingOwner, JobConcurrency: s.cfg.JobConcurrency, JobsPerUser: s.cfg.JobsPerUser,
		JobsPerWorkspace: s.cfg.JobsPerWorkspace, Remote: s.cfg.Remote, RemoteConcurrency: s.cfg.RemoteConcurrency})
	d.Start(leaseCtx, workCtx)
	go retention.New(retention.Config{Pool: s.pool, Retention: s.cfg.RequestRetention, Logger: s.cfg.Logger,
		Satellites: s.cfg.RetentionSatellites, Observer: s.cfg.Metrics}).Run(workCtx)
	resc := rescuer.New(rescuer.Config{Pool: s.pool, Dispatcher: d, Interval: s.cfg.RescueInterval,
		RescueAfter: s.cfg.RescueAfter, Logger: s.cfg.Logger, Observer: s.cfg.Metrics})
	go resc.Run(workCtx)
	go expiry.New(expiry.Config{Pool: s.pool, Interval: s.cfg.ForkExpiryInterval, Logger: s.cfg.Logger,
		Observer: s.cfg.Metrics}).Run(workCtx)
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		s.streamLoop(leaseCtx, d)
	}()
	select {
	case <-ctx.Done():
		s.cfg.Logger.Info("stopping: no new requests; waiting for running handlers", "grace", s.cfg.ShutdownGrace)
		graceCtx, cancel := context.WithTimeout(leaseCtx, s.cfg.ShutdownGrace)
		if err := d.Drain(graceCtx); err != nil {
			s.cfg.Logger.Warn("shutdown grace period over; unfinished requests are resumed by the next leader", "error", err)
		}
		cancel()
		cancelWork()
		cancelLease()
	case <-leaseCtx.Done():
		s.cfg.Logger.Warn("leadership lost: stopping work; the new leader resumes unfinished requests")
		cancelWork()
	}
	<-streamDone
}

// streamLoop keeps a replication session open, reconnecting with exponential backoff. Every
// (re)connect re-reads unfinished requests before streaming.
func (s *Sidecar) streamLoop(ctx context.Context, d *dispatch.Dispatcher) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := s.streamOnce(ctx, d)
		if ctx.Err() != nil {
			return
		}
		s.ready.Store(false)
		s.cfg.Metrics.Reconnect("replication")
		if time.Since(started) > 30*time.Second {
			backoff = 100 * time.Millisecond
		}
		s.cfg.Logger.Warn("replication stream ended; reconnecting", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// streamOnce runs one replication session. The slot name is read from the installation each
// time: when dataenv has been uninstalled the read fails, and no slot is re-created.
func (s *Sidecar) streamOnce(ctx context.Context, d *dispatch.Dispatcher) error {
	slot, err := s.slotName(ctx)
	if err != nil {
		return err
	}
	stream := replication.New(replication.Config{DSN: s.cfg.DSN, Slot: slot, Logger: s.cfg.Logger, Observer: s,
		AppName: fence.SessionName(s.id, fence.RoleReplication),
		OnConnected: func(ctx context.Context) error {
			n, err := d.Rescan(ctx)
			if err == nil {
				s.ready.Store(true)
				s.cfg.Logger.Info("replication connected", "slot", slot, "unfinished_requests_resumed", n)
			}
			return err
		}}, d)
	return stream.Run(ctx)
}

func (s *Sidecar) slotName(ctx context.Context) (string, error) {
	var slot string
	if err := s.pool.QueryRow(ctx, `SELECT dataenv.slot_name()`).Scan(&slot); err != nil {
		return "", fmt.Errorf("read slot name: %w", err)
	}
	return slot, nil
}

// SlotCreated implements replication.Observer. The first slot of an installation is no event;
// a slot created after some sidecar had already confirmed a position was lost and re-created.
func (s *Sidecar) SlotCreated() {
	var streamedBefore bool
	err := s.pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT FROM dataenv.sidecars WHERE confirmed_lsn IS NOT NULL)`).Scan(&streamedBefore)
	if err != nil || streamedBefore {
		s.cfg.Metrics.SlotRecreated("missing")
	}
}

// Confirmed implements replication.Observer.
func (s *Sidecar) Confirmed(lsn, _ pglogrepl.LSN, lag time.Duration) {
	s.lsn.Store(uint64(lsn))
	s.lag.Store(int64(lag))
	s.cfg.Metrics.SetConfirmedLSN(uint64(lsn))
}
