package satellite

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/retention"
)

// registration is a satellite the control knows, with its database's current name ("" when no
// database of that OID accepts connections any more).
type registration struct {
	installation uuid.UUID
	oid          uint32
	datname      string
}

const registeredSQL = `
SELECT s.installation_id, s.database_oid, coalesce(d.datname::text, '')
  FROM dataenv.satellites s
  LEFT JOIN pg_catalog.pg_database d ON d.oid = s.database_oid AND d.datallowconn
 ORDER BY s.database_oid, s.installation_id`

const identitySQL = `SELECT i.id FROM dataenv.installation i`

// PruneSatellites is the satellites' part of the retention pass (retention.Satellites): every
// registered satellite's finished requests past the retention, one satellite at a time. Each
// batch takes a connection from the shared pool only for itself (none is held during the
// pause), so retention never takes more than one of --satellite-connections and envelopes
// keep the others; each batch is preceded by the attest the envelope path does.
func (s *Service) PruneSatellites(ctx context.Context, p retention.Policy) int64 {
	regs, err := s.registered(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("request retention: list satellites", "error", err)
		}
		return 0
	}
	var total int64
	for _, r := range regs {
		if ctx.Err() != nil {
			break
		}
		n, err := s.pruneOne(ctx, p, r)
		total += n
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("request retention: satellite skipped", "database_oid", r.oid, "database", r.datname,
				"installation", r.installation, "deleted", n, "error", err)
		}
	}
	return total
}

func (s *Service) registered(ctx context.Context) ([]registration, error) {
	rows, err := s.cfg.Control.Query(ctx, registeredSQL)
	if err != nil {
		return nil, fmt.Errorf("read satellite registrations: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration, error) {
		var r registration
		err := row.Scan(&r.installation, &r.oid, &r.datname)
		return r, err
	})
}

// unfinishedSQL lists the satellite's requests whose envelope has not finished: a satellite row
// finished before its envelope (the sidecar stopped between the two outcome writes, or the row
// was cancelled while its envelope waited) is what that envelope's next attempt finishes with,
// so it stays until the envelope is done.
const unfinishedSQL = `
SELECT r.id FROM dataenv.requests r
 WHERE r.kind = 'satellite' AND r.status IN ('pending', 'running')
   AND r.args->>'installation_id' = $1::text`

func (s *Service) pruneOne(ctx context.Context, p retention.Policy, r registration) (int64, error) {
	if r.datname == "" {
		return 0, fmt.Errorf("no database with OID %d accepts connections", r.oid)
	}
	return p.Batches(ctx, func(ctx context.Context) (int64, error) {
		// Read before the batch: an envelope filed later is for a row that is not finished yet.
		keep, err := s.unfinished(ctx, r)
		if err != nil {
			return 0, err
		}
		conn, release, err := s.pool.Acquire(ctx, r.oid, r.datname)
		if err != nil {
			return 0, err
		}
		n, err := pruneBatch(ctx, conn, p, r, keep)
		release(err == nil)
		return n, err
	})
}

func (s *Service) unfinished(ctx context.Context, r registration) ([]uuid.UUID, error) {
	rows, err := s.cfg.Control.Query(ctx, unfinishedSQL, r.installation.String())
	if err != nil {
		return nil, fmt.Errorf("read the satellite's unfinished envelopes: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// pruneBatch deletes one batch in a satellite, but not the requests keep, once its tables are the
// installer's (attest, in a statement of its own) and its identity is the registered one: a
// counterfeit or a replacement is never written to.
func pruneBatch(ctx context.Context, conn *Conn, p retention.Policy, r registration, keep []uuid.UUID) (int64, error) {
	var real bool
	if err := conn.QueryRow(ctx, attestSQL, r.oid).Scan(&real); err != nil {
		return 0, fmt.Errorf("attest the satellite's tables: %w", err)
	}
	if !real {
		return 0, fmt.Errorf("database %s (OID %d) has no dataenv satellite tables owned by the installer: not pruned", r.datname, r.oid)
	}
	var id uuid.UUID
	if err := conn.QueryRow(ctx, identitySQL).Scan(&id); err != nil {
		return 0, fmt.Errorf("read the satellite's identity: %w", err)
	}
	if id != r.installation {
		return 0, fmt.Errorf("database %s holds installation %s, not the registered %s: not pruned", r.datname, id, r.installation)
	}
	n, err := p.DeleteBatch(ctx, conn.Conn, keep)
	if err != nil {
		return n, fmt.Errorf("prune satellite %s: %w", r.datname, err)
	}
	return n, nil
}
