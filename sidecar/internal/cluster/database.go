package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Crash points (sidecar/crashpoint) of the database side effects.
const (
	CrashAfterCreateDatabase = "cluster.create_database.after_create"
	// CrashAfterPrepare: a prepared staging database (CreateOptions.Prepare), still the admin's.
	CrashAfterPrepare      = "cluster.create_database.after_prepare"
	CrashAfterDropDatabase = "cluster.drop_database.after_drop"
)

// CreateOptions tune CreateMarkedDatabase.
type CreateOptions struct {
	// Request is the id of the request creating the database (required). It goes into the
	// marker and the record, and is what a re-run after a crash recognizes.
	Request uuid.UUID
	// Template, if set, is copied (CREATE DATABASE ... TEMPLATE); nobody may be connected to it.
	Template string
	// Clone copies Template with STRATEGY FILE_COPY under file_copy_method = clone (PostgreSQL
	// 18+): a reflink copy where the data directory's file system clones (see CanClone).
	Clone bool
	// ForWorkspace records the workspace a fork copy belongs to.
	ForWorkspace string
	// Owner owns the new database (default: the managed application role). The admin must be a
	// member of it.
	Owner string
	// Locale, without a Template, creates the database from template0 with this encoding and
	// locale (a copy that a restore fills must sort and compare like its parent).
	Locale *Locale
	// Private revokes the database's default privileges from PUBLIC (CONNECT, TEMPORARY) as soon
	// as it exists, so nobody but its owner (and roles that may act as it) can connect to a copy
	// before its own access list is set.
	Private bool
	// Spare, if set, is a database made beforehand that becomes the new one instead of a CREATE
	// DATABASE (spare.go); one that is not as recorded is left alone, and the database is created.
	Spare *Spare
	// Adopt, with a Spare that has a role, makes the spare's role the workspace role Owner names
	// (sparerole.go); Owner does not exist yet. A spare that cannot be taken so fails the call with
	// ErrSpareDeclined, having changed nothing.
	Adopt *Adoption
	// SpareRoleAs, with a Spare that has a role and no Adopt (the workspace role Owner names
	// exists), is the name the spare's role takes in the transaction that takes the spare, marked
	// for Request (names.TakenSpareRole): the role keeps owning the new database's objects until
	// the caller re-owns them and drops it (DropSpareRole with Request). Empty, or the spare or its
	// role not as recorded: the spare is left alone and the database created.
	SpareRoleAs string
	// Conn, if set, is an admin connection to the maintenance database (Locked.Connect with "")
	// to create the database on, which the caller keeps open and closes: a caller that already
	// asked the cluster something saves a connection. Nil: one is opened and closed.
	Conn *pgx.Conn
	// ConnectAhead starts opening an admin connection to the new database (Locked.ConnectAhead)
	// as soon as it has its name, while it is recorded: DatabaseOutcome.Dial, which the caller
	// takes or closes. A database created by an earlier attempt gets none.
	ConnectAhead bool
	// Prepare, if set, runs as the admin in the new database before anyone else may change it:
	// the database is created owned by the admin, closed to PUBLIC, given to Prepare on a
	// connection of its own, and handed to its owner only in the statement that marks and
	// renames it. What Prepare runs with the admin's rights (an extension's script) thus never
	// meets an object the owner could have put in its way. A re-run after an interruption finds
	// the staging database still the admin's and prepares it again: Prepare must be idempotent.
	// The admin must be a superuser (giving a database away needs no membership then). l is the
	// lifecycle lock's holder, for other connections Prepare needs.
	Prepare func(ctx context.Context, l *Locked, conn *pgx.Conn) error
}

// Locale is a database's encoding and locale, as pg_database has them.
type Locale struct {
	Encoding string // pg_encoding_to_char(encoding)
	Collate  string // datcollate
	Ctype    string // datctype
	Provider string // datlocprovider: c (libc), i (icu), b (builtin, PostgreSQL 17+)
	Locale   string // daticulocale (15, 16) or datlocale (17+); "" for libc
}

// clause is the CREATE DATABASE options of l (after TEMPLATE template0).
func (l Locale) clause() string {
	s := " ENCODING " + quoteLiteral(l.Encoding) + " LC_COLLATE " + quoteLiteral(l.Collate) + " LC_CTYPE " + quoteLiteral(l.Ctype)
	switch l.Provider {
	case "i":
		s += " LOCALE_PROVIDER icu ICU_LOCALE " + quoteLiteral(l.Locale)
	case "b":
		s += " LOCALE_PROVIDER builtin BUILTIN_LOCALE " + quoteLiteral(l.Locale)
	default:
		s += " LOCALE_PROVIDER libc"
	}
	return s
}

// owner is the role that owns a database created with opts on c.
func (opts CreateOptions) owner(c *Cluster) string {
	if opts.Owner != "" {
		return opts.Owner
	}
	return c.AppRole
}

// DatabaseOutcome is the result of a database request.
type DatabaseOutcome struct {
	Cluster  string `json:"cluster"`
	Database string `json:"database"`
	// Status: created, adopted (created by this request before a crash, recorded now),
	// unchanged (already done by this request), dropped.
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	// FromSpare: the database is CreateOptions.Spare, renamed.
	FromSpare bool `json:"from_spare,omitempty"`
	// Dial is the connection CreateOptions.ConnectAhead started (nil if none).
	Dial *Dial `json:"-"`
}

type databaseState struct {
	exists   bool
	owner    string
	comment  string
	oid      uint32
	ownerOID uint32
}

const databaseStateSQL = `
SELECT pg_catalog.pg_get_userbyid(d.datdba), coalesce(pg_catalog.shobj_description(d.oid, 'pg_database'), ''), d.oid, d.datdba
  FROM pg_catalog.pg_database d WHERE d.datname = $1`

func readDatabaseState(ctx context.Context, conn *pgx.Conn, name string) (databaseState, error) {
	s := databaseState{exists: true}
	err := conn.QueryRow(ctx, databaseStateSQL, name).Scan(&s.owner, &s.comment, &s.oid, &s.ownerOID)
	if errors.Is(err, pgx.ErrNoRows) {
		return databaseState{}, nil
	}
	if err != nil {
		return s, retryable(fmt.Errorf("read database %q: %w", name, err))
	}
	return s, nil
}

// databaseRecord returns the control record of name (no record: Exists is false).
func (l *Locked) databaseRecord(ctx context.Context, name string) (record, error) {
	return l.readRecord(ctx, databaseRecordSQL, "database", name)
}

// recordDatabaseIdentity fills the OID and owner of a record made before they were recorded (or
// by an interrupted attempt), from the database found under its name.
func (l *Locked) recordDatabaseIdentity(ctx context.Context, name string, st databaseState) error {
	_, err := l.Control().Exec(ctx, `UPDATE dataenv.managed_databases SET database_oid = $3, owner_oid = $4
		WHERE cluster = $1 AND name = $2 AND database_oid IS NULL`, l.cluster.Name, name, st.oid, st.ownerOID)
	if err != nil {
		return retryable(fmt.Errorf("record the OID of database %q of cluster %q: %w", name, l.cluster.Name, err))
	}
	return nil
}

// stagingName is the name a database has between CREATE DATABASE and its rename: derived from the
// request id, so a re-run finds it and nobody else's database can carry it by accident.
func stagingName(req uuid.UUID) string { return "dataenv_tmp_" + hex.EncodeToString(req[:]) }

// CreateMarkedDatabase creates database name owned by the managed application role (or
// opts.Owner), with the
// marker of opts.Request, and records it in dataenv.managed_databases; see the package doc for
// the crash-safe sequence. It is idempotent for one request and refuses a database that exists
// and is not this request's.
//
// An earlier attempt of the same request whose backend is still finishing (a CREATE DATABASE that
// outlived its killed sidecar) is waited out: its sessions are ended, and the checks run again.
func (l *Locked) CreateMarkedDatabase(ctx context.Context, name string, opts CreateOptions) (*DatabaseOutcome, error) {
	for round := 0; ; round++ {
		out, err := l.createMarkedDatabase(ctx, name, opts)
		if !errors.Is(err, errEarlierAttempt) {
			return out, err
		}
		if werr := l.waitOutEarlierAttempt(ctx, round, err); werr != nil {
			return nil, retryable(fmt.Errorf("create database %q on cluster %q: %w", name, l.cluster.Name, err))
		}
	}
}

func (l *Locked) createMarkedDatabase(ctx context.Context, name string, opts CreateOptions) (*DatabaseOutcome, error) {
	c := l.cluster
	out := &DatabaseOutcome{Cluster: c.Name, Database: name}
	if err := validateInternalName(name); err != nil {
		return nil, request.Refusef("create database on cluster %q: %v", c.Name, err)
	}
	if opts.Request == uuid.Nil {
		return nil, errors.New("CreateMarkedDatabase: CreateOptions.Request is required")
	}
	if err := c.checkReady(); err != nil {
		return nil, request.Refusef("create database %q: %v", name, err)
	}
	rec, err := l.databaseRecord(ctx, name)
	if err != nil {
		return nil, err
	}
	if rec.Exists() && rec.Request != opts.Request {
		return nil, request.Refusef("database %q already exists on cluster %q (created by request %s)", name, c.Name, rec.Request)
	}
	conn := opts.Conn
	if conn == nil {
		if conn, err = l.Connect(ctx, ""); err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
	}
	marker := markerFor(markedDatabase, opts.Request)
	st, err := readDatabaseState(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	if rec.Exists() {
		if !st.exists || st.comment != marker {
			return nil, request.Refusef("database %q on cluster %q is recorded as created by this request but is missing or its marker changed", name, c.Name)
		}
		if err := l.checkIdentity(ctx, conn, "database", name, rec, st.oid, st.ownerOID); err != nil {
			return nil, err
		}
		if err := l.recordDatabaseIdentity(ctx, name, st); err != nil {
			return nil, err
		}
		out.Status, out.Detail = StatusUnchanged, "already created by this request"
		return out, nil
	}
	if st.exists {
		if st.comment != marker || st.owner != opts.owner(c) {
			_ = l.dropStaging(ctx, conn, opts.Request)
			return nil, request.Refusef("database %q already exists on cluster %q and was not created by this request; dataenv does not adopt it", name, c.Name)
		}
		out.Status, out.Detail = StatusAdopted, "created by this request before an interruption; recorded now"
	} else {
		if out.FromSpare, err = l.createStagedAndRename(ctx, conn, name, opts, marker); err != nil {
			return nil, err
		}
		out.Status = StatusCreated
		if opts.ConnectAhead {
			out.Dial = l.ConnectAhead(ctx, name)
		}
	}
	crashpoint.HitOnce(CrashAfterCreateDatabase)
	if err := l.recordCreated(ctx, conn, name, opts, marker); err != nil {
		out.Dial.Close(ctx)
		return nil, err
	}
	return out, nil
}

// recordCreated records database name, which this request created, as it is now on the cluster.
func (l *Locked) recordCreated(ctx context.Context, conn *pgx.Conn, name string, opts CreateOptions, marker string) error {
	st, err := readDatabaseState(ctx, conn, name)
	if err != nil {
		return err
	}
	if !st.exists || st.comment != marker {
		return request.Refusef("database %q on cluster %q changed while it was being created; dataenv does not record it", name, l.cluster.Name)
	}
	return l.recordDatabase(ctx, name, opts, st)
}

// createStagedAndRename: CREATE DATABASE under the staging name (unless a previous attempt did),
// mark it, then rename it to name. A crash at any point leaves either a staging database this
// request recognizes by name, or name carrying this request's marker.
func (l *Locked) createStagedAndRename(ctx context.Context, conn *pgx.Conn, name string, opts CreateOptions, marker string) (fromSpare bool, err error) {
	staging := stagingName(opts.Request)
	st, err := readDatabaseState(ctx, conn, staging)
	if err != nil {
		return false, err
	}
	if !st.exists && opts.Spare != nil {
		if fromSpare, err = l.takeSpare(ctx, conn, staging, name, marker, opts); err != nil {
			return false, err
		}
		if !fromSpare && opts.Adopt != nil {
			return false, ErrSpareDeclined
		}
	}
	if !st.exists && !fromSpare {
		sql := "CREATE DATABASE " + ident(staging)
		if opts.Prepare == nil {
			sql += " OWNER " + ident(opts.owner(l.cluster))
		}
		if opts.Template != "" {
			sql += " TEMPLATE " + ident(opts.Template)
		} else if opts.Locale != nil {
			sql += " TEMPLATE template0" + opts.Locale.clause()
		}
		if opts.Template != "" && opts.Clone {
			if _, err := conn.Exec(ctx, "SET file_copy_method = clone"); err != nil {
				return false, fmt.Errorf("cluster %q: set file_copy_method = clone: %w", l.cluster.Name, err)
			}
			sql += " STRATEGY FILE_COPY"
		}
		if _, err := conn.Exec(ctx, sql); err != nil {
			err = fmt.Errorf("create database %q on cluster %q: %w", name, l.cluster.Name, err)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55006" { // the template is in use: try again later
				return false, retryable(err)
			}
			// The staging name is this request's alone: taken means an earlier attempt made it.
			return false, earlierAttempt(err, "23505", "42P04")
		}
	}
	if fromSpare {
		return true, nil // takeSpare marked and renamed it in its transaction
	}
	var stmts []string
	if opts.Prepare != nil {
		if err := l.prepareStaging(ctx, staging, opts.Prepare); err != nil {
			return false, fmt.Errorf("prepare the new database %q on cluster %q: %w", name, l.cluster.Name, err)
		}
		crashpoint.HitOnce(CrashAfterPrepare)
		stmts = append(stmts, "ALTER DATABASE "+ident(staging)+" OWNER TO "+ident(opts.owner(l.cluster)))
	}
	// Closed to PUBLIC, marked and renamed in one statement string (one implicit transaction, one
	// round trip): a crash or a failure leaves the staging database as CREATE DATABASE made it,
	// which this request recognizes by its name.
	stmts = append(stmts, markAndRename(staging, name, marker, opts.Private)...)
	if _, err := conn.Exec(ctx, strings.Join(stmts, ";\n")); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" {
			_ = l.dropStaging(ctx, conn, opts.Request)
			return false, request.Refusef("database %q already exists on cluster %q and was not created by this request", name, l.cluster.Name)
		}
		return false, earlierAttempt(fmt.Errorf("close to PUBLIC, mark and rename the new database %q on cluster %q: %w", name, l.cluster.Name, err), "3D000")
	}
	return fromSpare, nil
}

// prepareStaging closes the staging database, still the admin's, to PUBLIC and runs prepare in
// it. PUBLIC may have connected since CREATE DATABASE, but may create nothing that outlives its
// session there: the database and its public schema belong to the admin, and PUBLIC has no
// CREATE on either (PostgreSQL 15+). The session's search_path is the server's default, not
// the pinned one: extension scripts read it (PostGIS topology appends its schema to the
// session's default and sets that, so a default without public hides PostGIS's types from the
// rest of its script), and no other role can have made anything in this database to find.
func (l *Locked) prepareStaging(ctx context.Context, staging string, prepare func(context.Context, *Locked, *pgx.Conn) error) error {
	cfg, err := l.admin.connConfig(l.cluster, staging)
	if err != nil {
		return err
	}
	cfg.RuntimeParams["search_path"] = serverDefaultSearchPath
	conn, err := l.admin.connectWith(ctx, l.cluster, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := l.admin.fenceOn(ctx, l.cluster, conn, l.Control()); err != nil {
		return err
	}
	// A staging database of an earlier attempt that was made for its owner (the attempt did not
	// prepare) is not prepared: what its owner may have put in it would run as the admin.
	var mine bool
	if err := conn.QueryRow(ctx, stagingIsMineSQL).Scan(&mine); err != nil {
		return fmt.Errorf("read its owner: %w", err)
	}
	if !mine {
		return retryable(errors.New("an earlier attempt made it for its owner; it must be dropped and made again (the request's retry does)"))
	}
	if _, err := conn.Exec(ctx, "REVOKE ALL ON DATABASE "+ident(staging)+" FROM PUBLIC"); err != nil {
		return fmt.Errorf("close to PUBLIC: %w", err)
	}
	return prepare(ctx, l, conn)
}

// serverDefaultSearchPath is PostgreSQL's default search_path.
const serverDefaultSearchPath = `"$user", public`

const stagingIsMineSQL = `SELECT datdba = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
  FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()`

// markAndRename close the staging database to PUBLIC (private), mark it and rename it to name.
func markAndRename(staging, name, marker string, private bool) []string {
	var stmts []string
	if private {
		stmts = append(stmts, "REVOKE ALL ON DATABASE "+ident(staging)+" FROM PUBLIC")
	}
	return append(stmts, "COMMENT ON DATABASE "+ident(staging)+" IS "+quoteLiteral(marker),
		"ALTER DATABASE "+ident(staging)+" RENAME TO "+ident(name))
}

// dropStaging drops this request's staging database, if there is one.
func (l *Locked) dropStaging(ctx context.Context, conn *pgx.Conn, req uuid.UUID) error {
	_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(stagingName(req)))
	return err
}

// recordDatabase writes the control record of a database this request created, with the OID and
// owner it has now (st, read after the creation).
func (l *Locked) recordDatabase(ctx context.Context, name string, opts CreateOptions, st databaseState) error {
	_, err := l.Control().Exec(ctx, `INSERT INTO dataenv.managed_databases
		(cluster, name, created_by_request, for_workspace, template, database_oid, owner_oid)
		VALUES ($1, $2, $3, nullif($4, ''), nullif($5, ''), $6, $7)`,
		l.cluster.Name, name, opts.Request, opts.ForWorkspace, opts.Template, st.oid, st.ownerOID)
	if err != nil {
		return retryable(fmt.Errorf("record database %q of cluster %q: %w", name, l.cluster.Name, err))
	}
	return nil
}

// Use is something that names a managed database (a row of dataenv.managed_database_uses).
type Use struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Detail string `json:"detail,omitempty"`
}

func (u Use) String() string {
	if u.Detail == "" {
		return u.Kind + " " + u.Name
	}
	return u.Kind + " " + u.Name + " (" + u.Detail + ")"
}

// DatabaseUses lists what names database of the cluster (dataenv.managed_database_uses).
func (l *Locked) DatabaseUses(ctx context.Context, database string) ([]Use, error) {
	rows, err := l.Control().Query(ctx, `SELECT coalesce(kind, ''), coalesce(name, ''), coalesce(detail, '')
		FROM dataenv.managed_database_uses($1, $2)`, l.cluster.Name, database)
	if err != nil {
		return nil, retryable(fmt.Errorf("list the uses of database %q: %w", database, err))
	}
	uses, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Use, error) {
		var u Use
		return u, r.Scan(&u.Kind, &u.Name, &u.Detail)
	})
	if err != nil {
		return nil, retryable(fmt.Errorf("list the uses of database %q: %w", database, err))
	}
	return uses, nil
}

// DropOptions tune DropMarkedDatabase.
type DropOptions struct {
	// Exempt lists uses (by kind and name) the caller is cleaning up itself.
	Exempt []Use
	// TerminateSessions ends the sessions connected to the database (DROP DATABASE ... WITH
	// (FORCE)); otherwise connected sessions refuse the drop, listed in the error.
	TerminateSessions bool
	// AfterInterruption: an earlier attempt of the same request ran (and may have finished the
	// drop before it was interrupted), so no record and no database means dropped, not refused.
	AfterInterruption bool
}

// DropMarkedDatabase drops database name if the control record and the marker of the request it
// records both say dataenv created it, and nothing uses it; see the package doc.
func (l *Locked) DropMarkedDatabase(ctx context.Context, name string, opts DropOptions) (*DatabaseOutcome, error) {
	c := l.cluster
	out := &DatabaseOutcome{Cluster: c.Name, Database: name}
	rec, err := l.databaseRecord(ctx, name)
	if err != nil {
		return nil, err
	}
	notOurs := request.Refusef("database %q on cluster %q was not created by dataenv (no record in dataenv.managed_databases); it is left alone", name, c.Name)
	if !rec.Exists() && !opts.AfterInterruption {
		return nil, notOurs
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := readDatabaseState(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	if !rec.Exists() {
		if st.exists {
			return nil, notOurs
		}
		out.Status, out.Detail = StatusDropped, "already dropped by an earlier attempt of this request"
		return out, nil
	}
	if err := l.checkIdentity(ctx, conn, "database", name, rec, st.oid, st.ownerOID); err != nil {
		return nil, err
	}
	if st.exists {
		if err := l.checkDroppable(ctx, conn, name, rec, st, opts); err != nil {
			return nil, err
		}
		if err := dropDatabase(ctx, conn, name, opts.TerminateSessions); err != nil {
			return nil, err
		}
		crashpoint.HitOnce(CrashAfterDropDatabase)
		out.Status = StatusDropped
	} else {
		out.Status, out.Detail = StatusDropped, "already gone from the cluster; record removed"
	}
	if _, err := l.Control().Exec(ctx, `DELETE FROM dataenv.managed_databases WHERE cluster = $1 AND name = $2`, c.Name, name); err != nil {
		return nil, retryable(fmt.Errorf("remove the record of database %q: %w", name, err))
	}
	return out, nil
}

// checkDroppable refuses a database without the recorded request's marker, not owned by the
// application role when its owner was never recorded, in use, or (unless terminating) with
// connected sessions. Its OID and owner were compared with the record before (checkIdentity).
func (l *Locked) checkDroppable(ctx context.Context, conn *pgx.Conn, name string, rec record, st databaseState, opts DropOptions) error {
	c := l.cluster
	if st.comment != markerFor(markedDatabase, rec.Request) {
		return request.Refusef("database %q on cluster %q does not carry dataenv's marker for request %s (comment %q); it is left alone",
			name, c.Name, rec.Request, truncate(st.comment, 200))
	}
	if rec.OID == 0 && st.owner != c.AppRole {
		return request.Refusef("database %q on cluster %q is owned by %q, not by the managed application role %q, and its identity was never recorded; it is left alone",
			name, c.Name, st.owner, c.AppRole)
	}
	uses, err := l.DatabaseUses(ctx, name)
	if err != nil {
		return err
	}
	if uses = withoutExempt(uses, opts.Exempt); len(uses) > 0 {
		list := make([]string, len(uses))
		for i, u := range uses {
			list[i] = u.String()
		}
		return request.Refusef("database %q on cluster %q is in use by: %s; remove those first", name, c.Name, strings.Join(list, ", "))
	}
	if opts.TerminateSessions {
		return nil
	}
	sessions, err := connectedSessions(ctx, conn, name)
	if err != nil {
		return err
	}
	if len(sessions) > 0 {
		return request.Refusef("database %q on cluster %q has %d connected session(s): %s; close them, or drop with terminate_sessions => true",
			name, c.Name, len(sessions), strings.Join(sessions, "; "))
	}
	return nil
}

func withoutExempt(uses, exempt []Use) []Use {
	var out []Use
	for _, u := range uses {
		skip := false
		for _, e := range exempt {
			if e.Kind == u.Kind && e.Name == u.Name {
				skip = true
			}
		}
		if !skip {
			out = append(out, u)
		}
	}
	return out
}

func connectedSessions(ctx context.Context, conn *pgx.Conn, name string) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT format('pid %s user %s application %s from %s', pid, coalesce(usename::text, '?'),
			coalesce(nullif(application_name, ''), '-'), coalesce(client_addr::text, 'local socket'))
		FROM pg_catalog.pg_stat_activity WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid() ORDER BY pid`, name)
	if err != nil {
		return nil, retryable(fmt.Errorf("list the sessions of database %q: %w", name, err))
	}
	s, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, retryable(fmt.Errorf("list the sessions of database %q: %w", name, err))
	}
	return s, nil
}

func dropDatabase(ctx context.Context, conn *pgx.Conn, name string, terminate bool) error {
	err := execDropDatabase(ctx, conn, name, terminate)
	for try := 0; terminate && sqlState(err) == "42501" && try < 5; try++ {
		// WITH (FORCE) may not end a server process without a role (an autovacuum worker) for
		// an admin that is not a superuser; a plain DROP DATABASE makes autovacuum workers exit
		// and waits for them. A session that came meanwhile is forced out again.
		if workers, cerr := onlyServerProcesses(ctx, conn, name); cerr != nil || !workers {
			break
		}
		if err = execDropDatabase(ctx, conn, name, false); sqlState(err) == "55006" {
			err = execDropDatabase(ctx, conn, name, true)
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" {
		return request.Refusef("database %q is being accessed by other sessions (%s); close them, or drop with terminate_sessions => true",
			name, pgErr.Detail)
	}
	if terminate && errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return request.Refusef("database %q has sessions the cluster's admin may not terminate (%s); close them first", name, pgErr.Message)
	}
	if err != nil {
		return fmt.Errorf("drop database %q: %w", name, err)
	}
	return nil
}

func execDropDatabase(ctx context.Context, conn *pgx.Conn, name string, terminate bool) error {
	sql := "DROP DATABASE " + ident(name)
	if terminate {
		sql += " WITH (FORCE)"
	}
	_, err := conn.Exec(ctx, sql)
	return err
}

// onlyServerProcesses reports whether every process still on database name is one without a
// role (an autovacuum worker), or none is left.
func onlyServerProcesses(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var sessions int
	err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE usesysid IS NOT NULL)::int FROM pg_catalog.pg_stat_activity
		WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid()`, name).Scan(&sessions)
	return sessions == 0, err
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Handlers.

type databaseArgs struct {
	Cluster           string `json:"cluster"`
	Name              string `json:"name"`
	TerminateSessions bool   `json:"terminate_sessions"`
}

func (a *Admin) databaseArgs(ctx context.Context, req *request.Request, allowTerminate bool) (databaseArgs, error) {
	var args databaseArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return args, err
	}
	if args.TerminateSessions && !allowTerminate {
		return args, request.Refusef("%s: unknown argument terminate_sessions", req.Kind)
	}
	return args, checkNames(ctx, a.cfg.Control, req.Kind, "cluster", args.Cluster, "database", args.Name)
}

func (a *Admin) handleCreateDatabase(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	args, err := a.databaseArgs(ctx, req, false)
	if err != nil {
		return nil, err
	}
	var out *DatabaseOutcome
	err = a.WithLifecycleLock(ctx, args.Cluster, rep, func(ctx context.Context, l *Locked) error {
		out, err = l.CreateMarkedDatabase(ctx, args.Name, CreateOptions{Request: req.ID})
		return err
	})
	if err != nil {
		a.finish(ctx, rep, metrics.OpCreateDatabase, "database "+args.Name, "", "", err)
		return nil, err
	}
	a.finish(ctx, rep, metrics.OpCreateDatabase, "database "+args.Name, out.Status, out.Detail, nil)
	return out, nil
}

func (a *Admin) handleDropDatabase(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	args, err := a.databaseArgs(ctx, req, true)
	if err != nil {
		return nil, err
	}
	var out *DatabaseOutcome
	err = a.WithLifecycleLock(ctx, args.Cluster, rep, func(ctx context.Context, l *Locked) error {
		out, err = l.DropMarkedDatabase(ctx, args.Name, DropOptions{TerminateSessions: args.TerminateSessions,
			AfterInterruption: req.Attempts > 1})
		return err
	})
	if err != nil {
		a.finish(ctx, rep, metrics.OpDropDatabase, "database "+args.Name, "", "", err)
		return nil, err
	}
	a.finish(ctx, rep, metrics.OpDropDatabase, "database "+args.Name, out.Status, out.Detail, nil)
	return out, nil
}

// finish reports the final step of a database or role request, counts the side effect and logs
// it. status and detail are the outcome's when err is nil.
func (a *Admin) finish(ctx context.Context, rep request.Reporter, op, step, status, detail string, err error) {
	if err != nil {
		status = "failed"
		if request.IsRefused(err) {
			status = StatusRefused
		}
		detail = err.Error()
		a.log.Info("cluster request did not succeed", "operation", op, "step", step, "status", status, "error", detail)
	} else {
		a.log.Info("cluster request done", "operation", op, "step", step, "status", status)
	}
	request.Report(ctx, rep, step, status, detail)
	a.countSideEffect(op, err == nil && status != StatusUnchanged, err)
}

// countSideEffect counts a side effect as done, unchanged, refused or failed.
func (a *Admin) countSideEffect(op string, changed bool, err error) {
	a.cfg.Metrics.SideEffect(op, metrics.EffectResult(changed, err, request.IsRefused(err)))
}

// checkNames applies dataenv.check_name to (what, name) pairs: the names a handler is about to
// put into DDL obey the same rule the request's validator applied at insert time.
func checkNames(ctx context.Context, q control.Querier, kind string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := control.CheckName(ctx, q, pairs[i], pairs[i+1]); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
	}
	return nil
}
