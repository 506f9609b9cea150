package satellite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

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
	// Kind is the origin row's kind, for the dispatcher to class the envelope by; RequestedBy and
	// Workspace the row's requester and args.workspace, which a job counts against
	// (SchedulingOwner). Only hints, checked against the row before anything runs (mismatched).
	Kind        string `json:"kind"`
	RequestedBy string `json:"requested_by"`
	Workspace   string `json:"workspace"`
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

const loadSQL = `
SELECT verdict, kind, args, requested_by, status, result, error, created_at, denied
  FROM dataenv.envelope_load($1, $2, $3::xid8)`

const finishSQL = `SELECT dataenv.envelope_finish($1, $2, $3::xid8, $4, $5::jsonb, $6, $7)`

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

// attest refuses a database whose dataenv tables are not the installer's. It is a statement of
// its own, before anything of the schema runs: a counterfeit is never queried. What runs after
// it is the installer's (nobody else may create in an attested schema) and re-checks the
// installation's identity in its own statement.
//
// It runs once per session: an attested connection skips it for later envelopes. That is safe
// because what it proves cannot change under an open session except by the installer itself:
// the schema and both tables are owned by the installer's role and nobody else may create in the
// schema, so only that role (or a superuser, who is beyond any check) could drop, rename,
// replace or alter them, and the sidecar never does so in a satellite; the database of a session
// is fixed (a database cannot be renamed, nor dropped, while others are connected to it, and
// DROP DATABASE WITH (FORCE) ends the session). A reinstall by the installer is what the
// installation identity check in every envelope_load and envelope_finish is for. Any error on
// the connection drops the attestation (forget), so a session in doubt attests again.
func attest(ctx context.Context, conn *Conn, env envelope) error {
	if conn.attested == env.DatabaseOID && conn.oid == env.DatabaseOID {
		return nil
	}
	var real bool
	if err := conn.QueryRow(ctx, attestSQL, env.DatabaseOID).Scan(&real); err != nil {
		return fmt.Errorf("attest the satellite's tables: %w", err)
	}
	if !real {
		return fenced(env, "the database under that OID has no dataenv satellite tables owned by the installer")
	}
	conn.attested = env.DatabaseOID
	return nil
}

// mismatched refuses an envelope whose hints are not its row's: it was classed and capped by
// them, so running the row would let a job pass as a control-plane request, or as another
// user's or workspace's job. nil when they match.
func mismatched(env envelope, row originRow) error {
	var args struct {
		Workspace any `json:"workspace"`
	}
	_ = json.Unmarshal(row.Args, &args)
	ws, _ := args.Workspace.(string)
	var what, hint, real string
	switch {
	case row.Kind != env.Kind:
		what, hint, real = "kind", env.Kind, row.Kind
	case row.RequestedBy != env.RequestedBy:
		what, hint, real = "requested_by", env.RequestedBy, row.RequestedBy
	case ws != env.Workspace:
		what, hint, real = "workspace", env.Workspace, fmt.Sprint(args.Workspace)
	default:
		return nil
	}
	return request.Refusef("satellite request %s refused: its envelope says %s %q but the satellite's row has %q; nothing was run",
		env.RequestID, what, hint, real)
}

// discarded refuses the envelope of a request whose transaction rolled back after it was filed.
func discarded(env envelope) error {
	return request.Refusef("satellite request %s discarded: its transaction in the satellite rolled back", env.RequestID)
}

// errInProgress says the origin transaction has not ended yet.
var errInProgress = errors.New("the origin transaction is still in progress")

// load reads the envelope's row in its origin once the origin transaction has ended. A
// rolled-back origin is discarded; a row that is gone or not the envelope's is fenced.
func load(ctx context.Context, conn *Conn, env envelope) (row originRow, err error) {
	defer func() { forgetOnError(conn, err) }()
	if err := attest(ctx, conn, env); err != nil {
		return row, err
	}
	var verdict string
	var kind, requestedBy, status, denied *string
	var created *time.Time
	err = conn.QueryRow(ctx, loadSQL, env.InstallationID, env.RequestID, env.Xact).Scan(&verdict, &kind, &row.Args,
		&requestedBy, &status, &row.Result, &row.Error, &created, &denied)
	if err != nil {
		return row, fmt.Errorf("read the satellite's request: %w", err)
	}
	switch verdict {
	case "fenced":
		return row, fenced(env, "the satellite was removed or replaced since it filed the envelope")
	case "in progress":
		return row, errInProgress
	case "aborted":
		return row, discarded(env)
	case "missing":
		return row, fenced(env, "the satellite has no such request from that transaction")
	}
	row.Kind, row.RequestedBy, row.Status, row.CreatedAt = *kind, *requestedBy, request.Status(*status), *created
	if denied != nil {
		row.Denied = request.Refusef("%s", *denied)
	}
	return row, nil
}

// finish writes the outcome into the satellite's row, fenced like every access.
func finish(ctx context.Context, conn *Conn, env envelope, status request.Status, result []byte, errText *string, started time.Time) (err error) {
	defer func() { forgetOnError(conn, err) }()
	if err := attest(ctx, conn, env); err != nil {
		return err
	}
	var res any
	if result != nil {
		res = string(result)
	}
	var verdict string
	if err := conn.QueryRow(ctx, finishSQL, env.InstallationID, env.RequestID, env.Xact, string(status), res, errText, started).Scan(&verdict); err != nil {
		return fmt.Errorf("write the outcome into the satellite: %w", err)
	}
	if verdict == "fenced" {
		return fenced(env, "the satellite was removed or replaced while the request ran")
	}
	return nil
}

// forgetOnError drops a connection's attestation after any error on it.
func forgetOnError(conn *Conn, err error) {
	if err != nil {
		conn.attested = 0
	}
}
