// Package replication tails the control database's dataenv publications through a pgoutput
// logical replication slot and hands committed transactions to a Sink.
//
// One goroutine (Run) owns the replication connection: it is the only one that reads from it and
// the only one that sends standby status updates, on a timer and whenever the server asks. The
// sink acknowledges each transaction once every request in it is durable; the confirmed LSN is
// the end of the longest acknowledged prefix. With nothing outstanding, the server's WAL end is
// confirmed so that an idle slot holds no WAL even while other tables are busy.
package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
)

// Sink receives committed transactions in commit order. Deliver must not block for long (slow
// work would stall the stream past wal_sender_timeout); ack may be called later, from any
// goroutine, once the transaction's requests are durable.
type Sink interface {
	Deliver(ctx context.Context, tx *Tx, ack func()) error
}

// Observer is told about stream events (metrics); every method must be cheap.
type Observer interface {
	SlotCreated()
	Confirmed(lsn pglogrepl.LSN, serverEnd pglogrepl.LSN, lag time.Duration)
}

// Config of a Stream. Zero durations take the documented defaults.
type Config struct {
	DSN            string        // control database; replication=database is added
	AppName        string        // application_name of the walsender, default "dataenv-sidecar-replication"
	Slot           string        // slot name (dataenv_<database oid>)
	Publication    string        // comma-separated, default "dataenv,dataenv_requests"
	StatusInterval time.Duration // status update period, default 1s
	ProbeInterval  time.Duration // how often an idle stream asks for the server's WAL end, default 5s
	Logger         *slog.Logger
	Observer       Observer // may be nil
	// OnConnected runs after the slot is known to exist and before streaming starts: the caller
	// re-reads unfinished requests there, so that nothing committed before the slot's consistent
	// point (a slot dropped while the sidecar was away) is missed.
	OnConnected func(ctx context.Context) error
}

// Stream is one replication session factory; Run may be called again after it returns.
type Stream struct {
	cfg  Config
	sink Sink
}

// New returns a Stream delivering to sink.
func New(cfg Config, sink Sink) *Stream {
	if cfg.AppName == "" {
		cfg.AppName = "dataenv-sidecar-replication"
	}
	if cfg.Publication == "" {
		cfg.Publication = "dataenv,dataenv_requests"
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = time.Second
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Stream{cfg: cfg, sink: sink}
}

// Run connects, makes sure the slot exists, and streams until ctx ends or the connection fails.
// Before returning because ctx ended it sends a last status update with what is acknowledged.
func (s *Stream) Run(ctx context.Context) error {
	conn, err := connect(ctx, s.cfg.DSN, s.cfg.AppName)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := s.ensureSlot(ctx, conn); err != nil {
		return err
	}
	if s.cfg.OnConnected != nil {
		if err := s.cfg.OnConnected(ctx); err != nil {
			return fmt.Errorf("after replication connect: %w", err)
		}
	}
	start, err := s.startReplication(ctx, conn)
	if err != nil {
		return err
	}
	sess := &session{cfg: s.cfg, conn: conn, sink: s.sink, tr: newTracker(start), relations: map[uint32]*pglogrepl.RelationMessage{}}
	return sess.loop(ctx)
}

func connect(ctx context.Context, dsn, appName string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse control DSN: %w", err)
	}
	pgsession.Pin(cfg.RuntimeParams)
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = appName
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open replication connection: %w", err)
	}
	return conn, nil
}

// ensureSlot creates the slot when it is missing (first start, or dropped while we were away;
// the caller re-reads unfinished rows after every connect, so nothing is lost either way).
func (s *Stream) ensureSlot(ctx context.Context, conn *pgconn.PgConn) error {
	_, err := pglogrepl.CreateReplicationSlot(ctx, conn, s.cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		s.cfg.Logger.Warn("replication slot was missing: created it; unfinished requests are re-read from the table", "slot", s.cfg.Slot)
		if s.cfg.Observer != nil {
			s.cfg.Observer.SlotCreated()
		}
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "42710":
		return nil
	default:
		return fmt.Errorf("create replication slot %s: %w", s.cfg.Slot, err)
	}
}

// startReplication starts streaming from the slot's confirmed position. An invalidated slot
// (its WAL was removed) is dropped and re-created: the table re-read covers the gap.
func (s *Stream) startReplication(ctx context.Context, conn *pgconn.PgConn) (pglogrepl.LSN, error) {
	opts := pglogrepl.StartReplicationOptions{PluginArgs: []string{
		"proto_version '1'", fmt.Sprintf("publication_names '%s'", s.cfg.Publication)}}
	err := pglogrepl.StartReplication(ctx, conn, s.cfg.Slot, 0, opts)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55000" {
		s.cfg.Logger.Warn("replication slot is invalidated: re-creating it", "slot", s.cfg.Slot, "error", pgErr.Message)
		if derr := pglogrepl.DropReplicationSlot(ctx, conn, s.cfg.Slot, pglogrepl.DropReplicationSlotOptions{}); derr != nil {
			return 0, fmt.Errorf("drop invalidated slot %s: %w", s.cfg.Slot, derr)
		}
		if err := s.ensureSlot(ctx, conn); err != nil {
			return 0, err
		}
		err = pglogrepl.StartReplication(ctx, conn, s.cfg.Slot, 0, opts)
	}
	if err != nil {
		return 0, fmt.Errorf("start replication on slot %s: %w", s.cfg.Slot, err)
	}
	return 0, nil
}

// session is the state of one replication connection.
type session struct {
	cfg       Config
	conn      *pgconn.PgConn
	sink      Sink
	tr        *tracker
	relations map[uint32]*pglogrepl.RelationMessage
	cur       *Tx // transaction being decoded, nil between transactions
	serverEnd pglogrepl.LSN
	lastProbe time.Time
}

// loop reads with a deadline on the connection itself rather than a context per message: a
// deadline context per read (a timer and pgconn's context watcher, set up and torn down for every
// decoded message) was a tenth of the sidecar's CPU under load. One watcher for the whole session
// turns ctx's end into an immediate read timeout.
func (s *session) loop(ctx context.Context) error {
	nc := s.conn.Conn()
	stop := context.AfterFunc(ctx, func() { nc.SetReadDeadline(time.Now()) })
	defer stop()
	next := time.Now().Add(s.cfg.StatusInterval)
	nc.SetReadDeadline(next)
	for {
		if !time.Now().Before(next) {
			if err := s.sendStatus(ctx); err != nil {
				return err
			}
			next = time.Now().Add(s.cfg.StatusInterval)
			nc.SetReadDeadline(next)
		}
		// Checked after arming the deadline: a cancellation that came before it would
		// otherwise be overwritten and wait out the status interval.
		if ctx.Err() != nil {
			nc.SetReadDeadline(time.Time{})
			_ = s.sendStatus(context.WithoutCancel(ctx))
			return ctx.Err()
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if pgconn.Timeout(err) {
				continue
			}
			if ctx.Err() != nil {
				continue
			}
			return fmt.Errorf("receive replication message: %w", err)
		}
		if err := s.handle(ctx, msg); err != nil {
			return err
		}
	}
}

func (s *session) handle(ctx context.Context, msg pgproto3.BackendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		return s.handleCopyData(ctx, m.Data)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(m))
	default:
		return nil
	}
}

func (s *session) handleCopyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		s.serverEnd = max(s.serverEnd, ka.ServerWALEnd)
		if ka.ReplyRequested {
			return s.sendStatus(ctx)
		}
		return nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse XLogData: %w", err)
		}
		// XLogData's WAL end is not used for idle confirmation: only a keepalive's is the
		// position the walsender has decoded and sent everything up to.
		return s.decode(ctx, xld.WALData)
	}
	return nil
}

// sendStatus confirms what is acknowledged. While idle it asks, at most every ProbeInterval, for
// a keepalive so that it learns the server's WAL end and can confirm past unrelated traffic.
func (s *session) sendStatus(ctx context.Context) error {
	pos := s.tr.position(s.serverEnd, s.cur != nil)
	probe := s.tr.outstanding() == 0 && time.Since(s.lastProbe) >= s.cfg.ProbeInterval
	if probe {
		s.lastProbe = time.Now()
	}
	err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos,
		ClientTime: time.Now(), ReplyRequested: probe,
	})
	if err != nil {
		return fmt.Errorf("send standby status update: %w", err)
	}
	if s.cfg.Observer != nil {
		var lag time.Duration
		if oldest := s.tr.oldestCommit(); !oldest.IsZero() {
			lag = max(time.Since(oldest), 0)
		}
		s.cfg.Observer.Confirmed(pos, s.serverEnd, lag)
	}
	return nil
}
