package install

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/migrations"
	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
	"github.com/dataenv/dataenv/sqlapi"
)

// SatelliteProtocol is the readiness protocol version the satellites this binary installs speak
// (docs/satellites.md). The control's dataenv.satellite_protocols() says which versions it
// serves; release strings never decide compatibility.
const SatelliteProtocol = 1

// SatelliteOptions tune InstallSatellite.
type SatelliteOptions struct {
	ControlDatabase string // the database of the control installation, on the same cluster
	Logger          *slog.Logger
}

// InstallSatellite installs (or upgrades) a satellite installation in the database conn is
// connected to, registered with the control installation in opts.ControlDatabase of the same
// cluster, reached with conn's own connection settings. It refuses when that database holds no
// ready control installation whose protocols include SatelliteProtocol, and never creates one.
func InstallSatellite(ctx context.Context, conn *pgx.Conn, opts SatelliteOptions) (Report, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctrl, err := connectControl(ctx, conn, opts.ControlDatabase)
	if err != nil {
		return Report{}, err
	}
	defer ctrl.Close(context.WithoutCancel(ctx))
	if err := checkControl(ctx, ctrl, conn); err != nil {
		return Report{}, err
	}
	ms, err := satelliteMigrations()
	if err != nil {
		return Report{}, err
	}
	var rep Report
	err = withInstallLock(ctx, conn, func() error {
		kind, err := installationKind(ctx, conn)
		if err != nil {
			return err
		}
		if kind == "control" {
			return fmt.Errorf("database %s holds a control installation: a satellite goes into another database", conn.Config().Database)
		}
		if rep, err = migrate(ctx, conn, ms, opts.Logger); err != nil {
			return err
		}
		if err := createIdentity(ctx, conn, opts.ControlDatabase); err != nil {
			return err
		}
		api, err := fs.Sub(sqlapi.SatelliteFS, "satellite")
		if err != nil {
			return fmt.Errorf("satellite sqlapi: %w", err)
		}
		if err := applyAPI(ctx, conn, api, rep.ToVersion); err != nil {
			return err
		}
		return register(ctx, conn, ctrl)
	})
	return rep, err
}

func satelliteMigrations() ([]Migration, error) {
	sub, err := fs.Sub(migrations.SatelliteFS, "satellite")
	if err != nil {
		return nil, fmt.Errorf("satellite migrations: %w", err)
	}
	return LoadMigrations(sub)
}

// connectControl connects to controlDB with the settings of conn (same server, same role).
func connectControl(ctx context.Context, conn *pgx.Conn, controlDB string) (*pgx.Conn, error) {
	if controlDB == "" {
		return nil, errors.New("a satellite needs the database of its control installation (--control-database)")
	}
	if controlDB == conn.Config().Database {
		return nil, fmt.Errorf("--control-database %s is the database being installed: install the control there with dataenv install --dsn, and satellites in other databases", controlDB)
	}
	cfg := conn.Config().Copy()
	cfg.Database = controlDB
	pgsession.Pin(cfg.RuntimeParams)
	ctrl, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to control database %s: %w", controlDB, err)
	}
	return ctrl, nil
}

// checkControl refuses a control database without a ready control installation serving this
// binary's protocol, or one owned by another role than the installer (the sidecar reads
// satellites as the control's owner, and trusts only tables that role owns).
func checkControl(ctx context.Context, ctrl, sat *pgx.Conn) error {
	db := ctrl.Config().Database
	kind, err := installationKind(ctx, ctrl)
	if err != nil {
		return err
	}
	if kind != "control" {
		return fmt.Errorf("database %s holds no dataenv control installation: install it first (dataenv install --dsn <control database>); a satellite never creates one", db)
	}
	var hasProtocols bool
	if err := ctrl.QueryRow(ctx, `SELECT to_regprocedure('dataenv.satellite_protocols()') IS NOT NULL`).Scan(&hasProtocols); err != nil {
		return fmt.Errorf("read control readiness: %w", err)
	}
	if !hasProtocols {
		return fmt.Errorf("the control installation in %s predates satellites: upgrade it first (dataenv install --dsn <control database> with this binary)", db)
	}
	var lo, hi int
	var owner, me string
	err = ctrl.QueryRow(ctx, `SELECT p.min_version, p.max_version, n.nspowner::regrole::text, current_user
		FROM dataenv.satellite_protocols() p, pg_catalog.pg_namespace n WHERE n.nspname = 'dataenv'`).Scan(&lo, &hi, &owner, &me)
	if err != nil {
		return fmt.Errorf("read control readiness: %w", err)
	}
	if SatelliteProtocol < lo {
		return fmt.Errorf("the control installation in %s serves satellite protocols %d to %d, this binary's satellites speak %d: install the satellite with the control's dataenv version", db, lo, hi, SatelliteProtocol)
	}
	if SatelliteProtocol > hi {
		return fmt.Errorf("the control installation in %s serves satellite protocols %d to %d, this binary's satellites speak %d: upgrade the control first (dataenv install --dsn <control database>)", db, lo, hi, SatelliteProtocol)
	}
	var satUser string
	if err := sat.QueryRow(ctx, `SELECT current_user`).Scan(&satUser); err != nil {
		return fmt.Errorf("read installing role: %w", err)
	}
	if satUser != owner {
		return fmt.Errorf("install the satellite as %s, the role that installed the control (this connection is %s): the sidecar reads satellites as that role and trusts only what it owns", owner, satUser)
	}
	return nil
}

// installationKind is dataenv.installation's kind in conn's database, "" when there is none.
func installationKind(ctx context.Context, conn *pgx.Conn) (string, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('dataenv.installation') IS NOT NULL`).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for dataenv.installation: %w", err)
	}
	if !exists {
		return "", nil
	}
	var kind string
	err := conn.QueryRow(ctx, `SELECT kind FROM dataenv.installation`).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read dataenv.installation: %w", err)
	}
	return kind, nil
}

// createIdentity writes the satellite's identity once; a reinstall keeps it (and updates the
// protocol it speaks).
func createIdentity(ctx context.Context, conn *pgx.Conn, controlDB string) error {
	const q = `
INSERT INTO dataenv.installation (protocol, control_database, user_role, admin_role)
SELECT $1, $2, dataenv_role('user', d.datname, d.oid), dataenv_role('admin', d.datname, d.oid)
  FROM pg_catalog.pg_database d WHERE d.datname = current_database()
ON CONFLICT (singleton) DO UPDATE SET protocol = EXCLUDED.protocol, control_database = EXCLUDED.control_database`
	sql := strings.ReplaceAll(q, "dataenv_role(", "pg_temp.dataenv_satellite_role(")
	if _, err := conn.Exec(ctx, satelliteRoleFunc); err != nil {
		return fmt.Errorf("define satellite role names: %w", err)
	}
	if _, err := conn.Exec(ctx, sql, SatelliteProtocol, controlDB); err != nil {
		return fmt.Errorf("write the satellite's identity: %w", err)
	}
	return nil
}

// satelliteRoleFunc names a satellite's own roles after its database (dataenv_user_<db>,
// dataenv_admin_<db>), or after its OID when the name would not fit in a role name.
const satelliteRoleFunc = `
CREATE OR REPLACE FUNCTION pg_temp.dataenv_satellite_role(what text, db name, dboid oid) RETURNS name
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN octet_length('dataenv_' || what || '_' || db) <= 63 THEN 'dataenv_' || what || '_' || db
                ELSE 'dataenv_' || what || '_' || dboid::text END::name
$$`

// register records the satellite in the control installation with a login role of its own and
// hands the satellite that role's credentials. Each install sets a new password.
func register(ctx context.Context, sat, ctrl *pgx.Conn) error {
	var id uuid.UUID
	var dboid uint32
	var dbname string
	err := sat.QueryRow(ctx, `SELECT i.id, d.oid, d.datname FROM dataenv.installation i, pg_catalog.pg_database d
		WHERE d.datname = current_database()`).Scan(&id, &dboid, &dbname)
	if err != nil {
		return fmt.Errorf("read the satellite's identity: %w", err)
	}
	role := fmt.Sprintf("dataenv_satellite_%d_%s", dboid, strings.ReplaceAll(id.String(), "-", "")[:12])
	password := randomPassword()
	err = pgx.BeginFunc(ctx, ctrl, func(tx pgx.Tx) error {
		if err := dropStaleRegistrations(ctx, tx, dboid, id); err != nil {
			return err
		}
		return registerRole(ctx, tx, role, password, id, dboid, dbname)
	})
	if err != nil {
		return fmt.Errorf("register the satellite with the control installation: %w", err)
	}
	_, err = sat.Exec(ctx, `INSERT INTO dataenv.control_credentials (login_role, password) VALUES ($1, $2)
		ON CONFLICT (singleton) DO UPDATE SET login_role = EXCLUDED.login_role, password = EXCLUDED.password`, role, password)
	if err != nil {
		return fmt.Errorf("store the satellite's control credentials: %w", err)
	}
	return nil
}

func registerRole(ctx context.Context, tx pgx.Tx, role, password string, id uuid.UUID, dboid uint32, dbname string) error {
	ident := pgx.Identifier{role}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
		return fmt.Errorf("look for role %s: %w", role, err)
	}
	verb := "CREATE"
	if exists {
		verb = "ALTER"
	}
	stmts := []string{
		fmt.Sprintf("%s ROLE %s LOGIN NOINHERIT PASSWORD %s", verb, ident, quoteLiteral(password)),
		fmt.Sprintf("COMMENT ON ROLE %s IS %s", ident, quoteLiteral("dataenv: login role of the satellite installation in database "+dbname+"; may only file envelopes")),
		fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", pgx.Identifier{tx.Conn().Config().Database}.Sanitize(), ident),
		fmt.Sprintf("GRANT USAGE ON SCHEMA dataenv TO %s", ident),
		fmt.Sprintf("GRANT EXECUTE ON FUNCTION dataenv.satellite_enqueue_v1(uuid, xid8, text, name, text), dataenv.satellite_status_v1(), dataenv.satellite_cancel_v1(uuid) TO %s", ident),
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("set up login role %s: %w", role, err)
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO dataenv.satellites (installation_id, database_oid, database_name, login_role, protocol)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (installation_id) DO UPDATE SET database_name = EXCLUDED.database_name, protocol = EXCLUDED.protocol`,
		id, dboid, dbname, role, SatelliteProtocol)
	if err != nil {
		return fmt.Errorf("record the satellite: %w", err)
	}
	return nil
}

// dropStaleRegistrations forgets satellites that are gone for good (their database dropped, or
// another installation in this satellite's database) once none of their envelopes is unfinished:
// those are left for the sidecar to fence.
func dropStaleRegistrations(ctx context.Context, tx pgx.Tx, dboid uint32, id uuid.UUID) error {
	rows, err := tx.Query(ctx, `
SELECT s.login_role FROM dataenv.satellites s
 WHERE (NOT EXISTS (SELECT FROM pg_catalog.pg_database d WHERE d.oid = s.database_oid)
        OR (s.database_oid = $1 AND s.installation_id <> $2))
   AND NOT EXISTS (SELECT FROM dataenv.requests r WHERE r.kind = 'satellite' AND r.requested_by = s.login_role
                      AND r.status IN ('pending', 'running'))`, dboid, id)
	if err != nil {
		return fmt.Errorf("find stale satellite registrations: %w", err)
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("find stale satellite registrations: %w", err)
	}
	return dropLoginRoles(ctx, tx, roles)
}

// dropLoginRoles ends the sessions of satellites' login roles, deletes their registrations and
// drops the roles (their privileges are on this database only).
func dropLoginRoles(ctx context.Context, tx pgx.Tx, roles []string) error {
	for _, role := range roles {
		ident := pgx.Identifier{role}.Sanitize()
		stmts := []string{
			"SELECT count(pg_terminate_backend(pid)) FROM pg_catalog.pg_stat_activity WHERE usename = " + quoteLiteral(role),
			"DELETE FROM dataenv.satellites WHERE login_role = " + quoteLiteral(role),
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
			return fmt.Errorf("look for role %s: %w", role, err)
		}
		if exists {
			stmts = append(stmts, "DROP OWNED BY "+ident, "DROP ROLE "+ident)
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("remove satellite login role %s: %w", role, err)
			}
		}
	}
	return nil
}

func randomPassword() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
