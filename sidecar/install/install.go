// Package install installs, upgrades and removes dataenv in a control database: the numbered
// migrations of migrations/, then the idempotent API bundle of sqlapi/, under an advisory lock so
// that two installers never interleave.
package install

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/migrations"
	"github.com/dataenv/dataenv/sidecar/internal/version"
	"github.com/dataenv/dataenv/sqlapi"
)

// Report says what an install did.
type Report struct {
	FromVersion int      // schema version before (0: fresh install)
	ToVersion   int      // schema version after
	Applied     []string // migrations applied by this run
}

// Options tune Install. The zero value installs from the embedded files.
type Options struct {
	Migrations fs.FS // defaults to migrations.FS
	API        fs.FS // defaults to sqlapi.FS
	Logger     *slog.Logger
}

func (o *Options) defaults() {
	if o.Migrations == nil {
		o.Migrations = migrations.FS
	}
	if o.API == nil {
		o.API = sqlapi.FS
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Install applies pending migrations and re-applies the SQL API. It refuses a database whose
// schema is newer than this binary knows.
func Install(ctx context.Context, conn *pgx.Conn, opts Options) (Report, error) {
	opts.defaults()
	if err := Preflight(ctx, conn); err != nil {
		return Report{}, err
	}
	if kind, err := installationKind(ctx, conn); err != nil || kind == "satellite" {
		if err == nil {
			err = fmt.Errorf("database %s holds a satellite installation: upgrade it with dataenv install --dsn <it> --control-database <control database>", conn.Config().Database)
		}
		return Report{}, err
	}
	ms, err := LoadMigrations(opts.Migrations)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	err = withInstallLock(ctx, conn, func() error {
		var err error
		rep, err = migrate(ctx, conn, ms, opts.Logger)
		if err != nil {
			return err
		}
		return applyAPI(ctx, conn, opts.API, rep.ToVersion)
	})
	return rep, err
}

func migrate(ctx context.Context, conn *pgx.Conn, ms []Migration, log *slog.Logger) (Report, error) {
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS dataenv; "+createMigrationsTable); err != nil {
		return Report{}, fmt.Errorf("create dataenv schema: %w", err)
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return Report{}, err
	}
	rep := Report{FromVersion: maxVersion(applied)}
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].Version
	}
	if rep.FromVersion > latest {
		return rep, fmt.Errorf("database schema version %d is newer than this dataenv %s knows (%d): upgrade the binary instead",
			rep.FromVersion, version.Version, latest)
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if err := applyMigration(ctx, conn, m); err != nil {
			return rep, err
		}
		log.Info("applied migration", "version", m.Version, "name", m.Name)
		rep.Applied = append(rep.Applied, fmt.Sprintf("%03d_%s", m.Version, m.Name))
	}
	rep.ToVersion = latest
	return rep, nil
}

func maxVersion(applied map[int]bool) int {
	m := 0
	for v := range applied {
		m = max(m, v)
	}
	return m
}

// applyAPI re-creates, in one transaction, the API both installations share (sqlapi/shared),
// then every file of api (the control's or a satellite's), and stamps the schema comment.
func applyAPI(ctx context.Context, conn *pgx.Conn, api fs.FS, schemaVersion int) error {
	shared, err := fs.Sub(sqlapi.SharedFS, "shared")
	if err != nil {
		return fmt.Errorf("shared sqlapi: %w", err)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, src := range []fs.FS{shared, api} {
			if err := applyFiles(ctx, tx, src); err != nil {
				return err
			}
		}
		stamp := fmt.Sprintf("dataenv %s, schema version %d", version.Version, schemaVersion)
		_, err := tx.Exec(ctx, "COMMENT ON SCHEMA dataenv IS "+quoteLiteral(stamp))
		if err != nil {
			return fmt.Errorf("stamp dataenv schema: %w", err)
		}
		return nil
	})
}

// applyFiles runs every *.sql file of fsys in name order.
func applyFiles(ctx context.Context, tx pgx.Tx, fsys fs.FS) error {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return fmt.Errorf("list sqlapi files: %w", err)
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return fmt.Errorf("read sqlapi %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return fmt.Errorf("apply sqlapi %s: %w", name, err)
		}
	}
	return nil
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Advisory lock classes of dataenv.lock_class (sqlapi/000_roles.sql), needed here before the
// schema exists (install) or after it is gone (uninstall).
const (
	leaderLockClass  = 1685021539
	installLockClass = 1685021540
)

// withInstallLock runs fn holding the session-level install lock of this database.
func withInstallLock(ctx context.Context, conn *pgx.Conn, fn func() error) (err error) {
	const lock = `SELECT pg_advisory_lock($1, hashtext(current_database()))`
	const unlock = `SELECT pg_advisory_unlock($1, hashtext(current_database()))`
	if _, err := conn.Exec(ctx, lock, installLockClass); err != nil {
		return fmt.Errorf("take install lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), unlock, installLockClass); uerr != nil && err == nil {
			err = fmt.Errorf("release install lock: %w", uerr)
		}
	}()
	return fn()
}

// SchemaVersion returns the installed schema version, or 0 when dataenv is not installed.
func SchemaVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v *int
	err := conn.QueryRow(ctx, `SELECT CASE WHEN to_regclass('dataenv.schema_migrations') IS NULL THEN NULL
		ELSE (SELECT max(version) FROM dataenv.schema_migrations) END`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// LatestVersion is the schema version this binary installs.
func LatestVersion() int {
	ms, err := LoadMigrations(migrations.FS)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}
