package satellite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// envelope is the args of a request of kind satellite, as dataenv.satellite_enqueue_v1 builds it
// from the filing login role's registration.
type envelope struct {
	DatabaseOID    uint32    `json:"database_oid,string"`
	InstallationID uuid.UUID `json:"installation_id"`
	RequestID      uuid.UUID `json:"request_id"`
	Xact           string    `json:"xact"`
	Protocol       int       `json:"protocol"`
}

// attestSQL checks, from the catalogs only, that the satellite's tables are the real ones before
// anything reads them: ordinary permanent tables in the dataenv schema, both owned by the
// sidecar's own role (the installer), in a schema nobody else may create objects in, in the
// database of the OID the envelope names (a rename or a replacement in between shows here).
const attestSQL = `
SELECT (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()) = $1
   AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'dataenv' AND c.relname IN ('installation', 'requests')
           AND c.relkind = 'r' AND c.relpersistence = 'p'
           AND c.relowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
           AND n.nspowner = c.relowner
           AND NOT EXISTS (SELECT FROM pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a
                            WHERE a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner)) = 2`

// identitySQL reads the installation's identity. The table's lock (ACCESS SHARE, held to the end
// of the transaction) keeps the installation from being dropped and replaced between this check
// and what the transaction reads or writes next; no row lock, so a read-only check writes nothing.
const identitySQL = `SELECT id FROM ONLY dataenv.installation`

const rowSQL = `
SELECT kind, args, requested_by, status, result, error, created_at
  FROM ONLY dataenv.requests WHERE id = $1 AND xact = $2::xid8`

const finishSQL = `
UPDATE ONLY dataenv.requests
   SET status = $3, result = $4::jsonb, error = $5, attempts = attempts + 1,
       started_at = coalesce(started_at, $6), finished_at = clock_timestamp(), updated_at = clock_timestamp()
 WHERE id = $1 AND xact = $2::xid8 AND status IN ('pending', 'running')`

// originRow is the satellite's own row of a request.
type originRow struct {
	Kind        string
	Args        json.RawMessage
	RequestedBy string
	Status      request.Status
	Result      json.RawMessage
	Error       *string
	CreatedAt   time.Time
	// Denied is the satellite's refusal of the requester (dataenv.authorize_request there),
	// checked only for a row still to run.
	Denied error
}

// fenced refuses an envelope whose origin is not the installation that filed it: nothing runs
// and nothing is written.
func fenced(env envelope, why string) error {
	return request.Refusef("satellite request %s fenced: %s; nothing was run or written", env.RequestID, why)
}

// inOrigin runs fn in one transaction on conn after attesting the tables and locking the
// identity row of the envelope's installation.
func inOrigin(ctx context.Context, conn *pgx.Conn, env envelope, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var real bool
		if err := tx.QueryRow(ctx, attestSQL, env.DatabaseOID).Scan(&real); err != nil {
			return fmt.Errorf("attest the satellite's tables: %w", err)
		}
		if !real {
			return fenced(env, "the database under that OID has no dataenv satellite tables owned by the installer")
		}
		var id uuid.UUID
		err := tx.QueryRow(ctx, identitySQL).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && id != env.InstallationID) {
			return fenced(env, "the satellite was removed or replaced since it filed the envelope")
		}
		if err != nil {
			return fmt.Errorf("read the satellite's identity: %w", err)
		}
		return fn(tx)
	})
}

// errInProgress says the origin transaction has not ended yet.
var errInProgress = errors.New("the origin transaction is still in progress")

// load reads the envelope's row in its origin once the origin transaction has ended. A
// rolled-back origin is discarded; a row that is gone or not the envelope's is fenced.
func load(ctx context.Context, conn *pgx.Conn, env envelope) (originRow, error) {
	var row originRow
	err := inOrigin(ctx, conn, env, func(tx pgx.Tx) error {
		var status *string
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.pg_xact_status($1::xid8)`, env.Xact).Scan(&status); err != nil {
			return fmt.Errorf("check the origin transaction: %w", err)
		}
		if status != nil && *status == "in progress" {
			return errInProgress
		}
		if status != nil && *status == "aborted" {
			return request.Refusef("satellite request %s discarded: its transaction in the satellite rolled back", env.RequestID)
		}
		err := tx.QueryRow(ctx, rowSQL, env.RequestID, env.Xact).Scan(&row.Kind, &row.Args, &row.RequestedBy,
			&row.Status, &row.Result, &row.Error, &row.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return fenced(env, "the satellite has no such request from that transaction")
		}
		if err != nil {
			return fmt.Errorf("read the satellite's request: %w", err)
		}
		if row.Status.Finished() {
			return nil
		}
		row.Denied, err = authorize(ctx, tx, row)
		return err
	})
	return row, err
}

// authorize applies the satellite's own policy (dataenv.authorize_request in the origin) to the
// row's requester: a refusal is returned as the first value, a failure to check as the second.
// A savepoint keeps the transaction usable after a refusal.
func authorize(ctx context.Context, tx pgx.Tx, row originRow) (denied, err error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	_, err = sp.Exec(ctx, `SELECT dataenv.authorize_request($1, $2::jsonb, $3)`, row.Kind, string(row.Args), row.RequestedBy)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42501" || pgErr.Code == "22023") {
		_ = sp.Rollback(ctx)
		if pgErr.Hint != "" {
			return request.Refusef("%s (%s)", pgErr.Message, pgErr.Hint), nil
		}
		return request.Refusef("%s", pgErr.Message), nil
	}
	if err != nil {
		return nil, fmt.Errorf("check who may make it in the satellite: %w", err)
	}
	return nil, sp.Commit(ctx)
}

// finish writes the outcome into the satellite's row, fenced like every access.
func finish(ctx context.Context, conn *pgx.Conn, env envelope, status request.Status, result []byte, errText *string, started time.Time) error {
	return inOrigin(ctx, conn, env, func(tx pgx.Tx) error {
		var res any
		if result != nil {
			res = string(result)
		}
		if _, err := tx.Exec(ctx, finishSQL, env.RequestID, env.Xact, string(status), res, errText, started); err != nil {
			return fmt.Errorf("write the outcome into the satellite: %w", err)
		}
		return nil
	})
}
