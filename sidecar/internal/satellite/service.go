// Package satellite runs the envelopes satellite installations file in the control database
// (docs/satellites.md): for each it connects to the origin database by OID over a small shared
// pool, proves the installation is still the one that filed it, waits for the origin transaction
// to end, runs the request under the satellite's own authorization and writes the outcome back
// into the satellite's row.
package satellite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Kind is the request kind of an envelope in the control database.
const Kind = "satellite"

// Config of the envelope service.
type Config struct {
	Control *pgxpool.Pool
	// MaxConns bounds the connections to all satellites together (default 4); IdleTimeout closes
	// one unused that long (default 10s).
	MaxConns    int
	IdleTimeout time.Duration
	// Kinds are the handlers of the kinds a satellite offers, run without the control's
	// authorization (the satellite's own is applied in the origin instead).
	Kinds  map[string]request.Handler
	Logger *slog.Logger
}

// Service is the handler of kind satellite.
type Service struct {
	cfg  Config
	pool *Pool
}

// New builds the service on the control pool's connection settings.
func New(cfg Config) *Service {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 4
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, pool: NewPool(cfg.Control, cfg.MaxConns, cfg.IdleTimeout)}
}

// Offer adds a kind satellites offer beyond those of Config.Kinds: h runs behind the control's
// own authorization and validation of the request (the registry's handler of kind, which the
// control's policy wraps), so workspace membership in the control applies to the satellite's
// requester. Call it before the dispatcher starts.
func (s *Service) Offer(kind string, h request.Handler) {
	if s.cfg.Kinds == nil {
		s.cfg.Kinds = map[string]request.Handler{}
	}
	s.cfg.Kinds[kind] = validated{control: s.cfg.Control, h: h}
}

// An envelope is claimed in the control like any request (running with an attempt number,
// compare-and-set, rescued when its holder dies), because satellites offer kinds with side
// effects: the dispatcher then never runs one twice at once, and a job's attempt fences its
// earlier attempts' sessions as it does for a control request.

// StatelessFor exempts an envelope that says ping from the claim, as a control ping is: a ping
// has no side effect, and an envelope saying ping never runs anything else (its row is checked to
// be a ping first, mismatched), while both writes into the satellite's row (the outcome, or the
// refusal) are compare-and-sets on its status, so running one twice (after a crash, or by two
// sidecars for a moment) writes it once. It saves a commit in the control per satellite ping.
func (s *Service) StatelessFor(req *request.Request) bool {
	return req.Kind == Kind && SchedulingKind(*req) == "ping"
}

// Register adds the envelope kind to reg.
func (s *Service) Register(reg *request.Registry) { reg.Register(Kind, s) }

// Run closes idle satellite connections until ctx ends.
func (s *Service) Run(ctx context.Context) { s.pool.Run(ctx) }

// Stats returns the satellite connections open and in use.
func (s *Service) Stats() (open, inUse int) { return s.pool.Stats() }

// Handle runs one envelope. Every step before the outcome only reads the origin, so a crash
// anywhere runs it again from the start; once the outcome is in the satellite's row, a new
// attempt returns that outcome instead of running the request again.
func (s *Service) Handle(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var env envelope
	if err := request.DecodeArgs(req, &env); err != nil {
		return nil, err
	}
	if env.RequestID != req.ID {
		return nil, fenced(env, "the envelope's id is not the satellite request's")
	}
	// Transaction ids are the cluster's, so the control database answers whether the origin
	// transaction ended: no satellite connection is held while it commits.
	datname, err := s.waitEnded(ctx, env)
	if err != nil {
		return nil, err
	}
	conn, release, err := s.pool.Acquire(ctx, env.DatabaseOID, datname)
	if err != nil {
		return nil, request.Retryable(err)
	}
	healthy := false
	defer func() { release(healthy) }()
	res, err := s.run(ctx, conn, env, req, rep)
	forgetOnError(conn, err)
	healthy = err == nil || request.IsRefused(err)
	return res, err
}

// resolve finds the origin database's current name by its OID: a renamed database is still
// served, a dropped one is fenced.
func (s *Service) resolve(ctx context.Context, env envelope) (string, error) {
	var datname string
	err := s.cfg.Control.QueryRow(ctx, `SELECT datname::text FROM pg_catalog.pg_database WHERE oid = $1 AND datallowconn`, env.DatabaseOID).Scan(&datname)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fenced(env, fmt.Sprintf("no database with OID %d accepts connections any more", env.DatabaseOID))
	}
	if err != nil {
		return "", request.Retryable(fmt.Errorf("resolve the satellite's database: %w", err))
	}
	return datname, nil
}

func (s *Service) run(ctx context.Context, conn *Conn, env envelope, req *request.Request, rep request.Reporter) (any, error) {
	row, err := s.waitOrigin(ctx, conn, env)
	if err != nil {
		return nil, err
	}
	if row.Status.Finished() {
		return previousOutcome(env, row)
	}
	started := time.Now()
	if err := mismatched(env, row); err != nil {
		return nil, s.fail(ctx, conn, env, err, started)
	}
	if row.Denied != nil {
		return nil, s.fail(ctx, conn, env, row.Denied, started)
	}
	h, ok := s.cfg.Kinds[row.Kind]
	if !ok {
		return nil, s.fail(ctx, conn, env, request.Refusef("%s: not a kind satellites offer", row.Kind), started)
	}
	inner := &request.Request{ID: req.ID, Kind: row.Kind, Args: row.Args, Status: request.Running,
		Attempts: req.Attempts, RequestedBy: row.RequestedBy, CreatedAt: row.CreatedAt}
	res, err := h.Handle(ctx, inner, rep)
	if err != nil && errors.Is(context.Cause(ctx), request.ErrCancelledByUser) {
		return nil, s.cancelled(conn, env, started)
	}
	if err != nil {
		if request.IsTransient(err) {
			return nil, err
		}
		return nil, s.fail(ctx, conn, env, err, started)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("%s: encode result: %w", row.Kind, err)
	}
	if err := finish(ctx, conn, env, request.Succeeded, out, nil, started); err != nil {
		return nil, retryUnlessFenced(err)
	}
	crashpoint.Hit("satellite.after_origin_outcome")
	return json.RawMessage(out), nil
}

// waitEnded waits briefly while the origin transaction is in progress (its envelope commits just
// before it does), then asks for another attempt; a rolled-back one discards the envelope. The
// same round trip resolves the origin database's current name by its OID (resolve), and reads
// the envelope's own status: an unclaimed (ping) envelope delivered again after it finished (a
// rescue racing a late decoded insert) then ends here, without a satellite connection; its
// outcome write matches no row and is dropped.
func (s *Service) waitEnded(ctx context.Context, env envelope) (string, error) {
	pause := 250 * time.Microsecond
	deadline := time.Now().Add(2 * time.Second)
	for {
		var status, datname, own *string
		if err := s.cfg.Control.QueryRow(ctx, endedSQL, env.Xact, env.DatabaseOID, env.RequestID).Scan(&status, &datname, &own); err != nil {
			return "", request.Retryable(fmt.Errorf("check the origin transaction: %w", err))
		}
		switch {
		case own != nil && request.Status(*own).Finished():
			return "", request.Refusef("satellite request %s: its envelope is already %s", env.RequestID, *own)
		case status != nil && *status == "aborted":
			return "", discarded(env)
		case (status == nil || *status != "in progress") && datname == nil:
			return "", fenced(env, fmt.Sprintf("no database with OID %d accepts connections any more", env.DatabaseOID))
		case status == nil || *status != "in progress":
			return *datname, nil
		case time.Now().After(deadline):
			return "", request.Retryable(errInProgress)
		}
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-time.After(pause):
		}
		pause = min(pause*2, 20*time.Millisecond)
	}
}

const endedSQL = `SELECT pg_catalog.pg_xact_status($1::xid8),
       (SELECT d.datname::text FROM pg_catalog.pg_database d WHERE d.oid = $2 AND d.datallowconn),
       (SELECT r.status FROM dataenv.requests r WHERE r.id = $3)`

// waitOrigin loads the origin row; its transaction has ended by now (waitEnded), so "in
// progress" is only a race with the check, worth another attempt.
func (s *Service) waitOrigin(ctx context.Context, conn *Conn, env envelope) (originRow, error) {
	row, err := load(ctx, conn, env)
	return row, retryUnlessFenced(err)
}

// fail writes a final failure into the satellite's row and returns it for the envelope.
func (s *Service) fail(ctx context.Context, conn *Conn, env envelope, cause error, started time.Time) error {
	text := cause.Error()
	if err := finish(ctx, conn, env, request.Failed, nil, &text, started); err != nil {
		return retryUnlessFenced(err)
	}
	if request.IsRefused(cause) {
		return cause
	}
	return request.Refusef("%s", text)
}

// cancelled writes the cancellation into the satellite's row once dataenv.cancel() stopped the
// job (the dispatcher writes the envelope's). ctx is done by then, so the write has its own.
func (s *Service) cancelled(conn *Conn, env envelope, started time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	text := request.ErrCancelledByUser.Error()
	if err := finish(ctx, conn, env, request.Cancelled, nil, &text, started); err != nil {
		return retryUnlessFenced(err)
	}
	return request.ErrCancelledByUser
}

// NoteCancelled writes the cancellation into the satellite's row when the dispatcher cancels an
// envelope between two attempts (no handler runs then), so that the row does not stay running.
func (s *Service) NoteCancelled(ctx context.Context, req *request.Request) error {
	var env envelope
	if err := request.DecodeArgs(req, &env); err != nil {
		return err
	}
	datname, err := s.resolve(ctx, env)
	if err != nil {
		return err
	}
	conn, release, err := s.pool.Acquire(ctx, env.DatabaseOID, datname)
	if err != nil {
		return err
	}
	text := request.ErrCancelledByUser.Error()
	err = finish(ctx, conn, env, request.Cancelled, nil, &text, time.Now())
	release(err == nil || request.IsRefused(err))
	return err
}

// previousOutcome is what an earlier attempt (or a cancellation in the satellite) left in the
// satellite's row: the envelope finishes with it, nothing runs twice.
func previousOutcome(env envelope, row originRow) (any, error) {
	switch row.Status {
	case request.Succeeded:
		return row.Result, nil
	case request.Cancelled:
		return nil, request.Refusef("satellite request %s was cancelled in the satellite before it ran", env.RequestID)
	default:
		text := "failed"
		if row.Error != nil {
			text = *row.Error
		}
		return nil, request.Refusef("%s", text)
	}
}

func retryUnlessFenced(err error) error {
	if err == nil || request.IsRefused(err) {
		return err
	}
	return request.Retryable(err)
}

// IsEnvelope reports whether req is a satellite's envelope (dispatch.Config.Remote): it waits for
// a connection to its satellite, so it is scheduled apart from the control's own requests.
func IsEnvelope(req request.Request) bool { return req.Kind == Kind }

// SchedulingKind is the kind a request is scheduled as (dispatch.Config.SchedulingKind): an
// envelope's inner kind (args.kind), so a satellite's run waits for a job slot and its ping does
// not; any other request's own kind. The inner kind is only a hint: the envelope is refused when
// its origin row has another kind.
func SchedulingKind(req request.Request) string {
	if req.Kind != Kind {
		return req.Kind
	}
	var a struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(req.Args, &a); err != nil || a.Kind == "" {
		return req.Kind
	}
	return a.Kind
}
