// Package leader elects the one active sidecar of an installation with a session advisory lock in
// the control database. The lock lives as long as its connection: a leader that dies or loses the
// connection frees it, and a standby polling for it takes over. The lock is not a fencing token:
// request state changes are compare-and-set on the attempt number, so a stale leader that has not
// yet noticed its loss cannot overwrite a newer outcome.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
)

const tryLockSQL = `SELECT pg_try_advisory_lock(dataenv.lock_class('leader'), hashtext(current_database()))`
const unlockSQL = `SELECT pg_advisory_unlock(dataenv.lock_class('leader'), hashtext(current_database()))`

// Elector campaigns for leadership.
type Elector struct {
	DSN      string
	AppName  string        // application_name of the lock's connection, default "dataenv-sidecar-leader"
	Interval time.Duration // poll and liveness-check period, default 1s
	Logger   *slog.Logger
}

// Lease is held leadership. Lost is closed when the lock's connection fails.
type Lease struct {
	conn   *pgx.Conn
	lost   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	logger *slog.Logger
}

// StepDownBound is the longest a leader that lost its lock keeps working before it notices:
// one liveness period until its next check, plus that check's timeout. A new leader waits this
// long before it fences a predecessor that may still be alive, so the predecessor opens no
// session after the fence.
func (e *Elector) StepDownBound() time.Duration {
	interval := e.Interval
	if interval <= 0 {
		interval = time.Second
	}
	return interval + pingTimeout(interval)
}

func pingTimeout(interval time.Duration) time.Duration { return 2*interval + time.Second }

// Campaign blocks until this process holds the leader lock or ctx ends.
func (e *Elector) Campaign(ctx context.Context) (*Lease, error) {
	interval := e.Interval
	if interval <= 0 {
		interval = time.Second
	}
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	waiting := false
	for {
		lease, err := e.try(ctx, interval, log)
		if lease != nil {
			return lease, nil
		}
		if err != nil {
			log.Warn("leader election attempt failed", "error", err)
		} else if !waiting {
			log.Info("another sidecar leads; standing by")
			waiting = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(interval):
		}
	}
}

func (e *Elector) try(ctx context.Context, interval time.Duration, log *slog.Logger) (*Lease, error) {
	cfg, err := pgx.ParseConfig(e.DSN)
	if err != nil {
		return nil, fmt.Errorf("parse control DSN: %w", err)
	}
	pgsession.Pin(cfg.RuntimeParams)
	cfg.RuntimeParams["application_name"] = e.AppName
	if e.AppName == "" {
		cfg.RuntimeParams["application_name"] = "dataenv-sidecar-leader"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect for leader election: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, tryLockSQL).Scan(&got); err != nil || !got {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	l := &Lease{conn: conn, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}), logger: log}
	go l.watch(interval)
	log.Info("this sidecar is the leader")
	return l, nil
}

// watch checks the lock's connection; leadership is lost when it stops answering.
func (l *Lease) watch(interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout(interval))
		err := l.conn.Ping(ctx)
		cancel()
		if err != nil {
			l.logger.Error("leader lock connection lost: stepping down", "error", err)
			close(l.lost)
			return
		}
	}
}

// Lost is closed when leadership is lost.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release gives leadership up (unlock and close the connection).
func (l *Lease) Release(ctx context.Context) {
	close(l.stop)
	<-l.done
	_, _ = l.conn.Exec(ctx, unlockSQL)
	_ = l.conn.Close(ctx)
}
