package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// dropPrefixed drops the databases, then the roles, whose names start with prefix.
func (p *Postgres) dropPrefixed(ctx context.Context, prefix string) error {
	var dbs, roles []string
	err := p.admin(ctx, func(conn *pgx.Conn) error {
		like := strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(prefix) + "%"
		var err error
		if dbs, err = collect(ctx, conn, "SELECT datname FROM pg_database WHERE datname LIKE $1", like); err != nil {
			return err
		}
		roles, err = collect(ctx, conn, "SELECT rolname FROM pg_roles WHERE rolname LIKE $1", like)
		return err
	})
	if err != nil {
		return err
	}
	return errors.Join(p.dropDatabases(ctx, dbs...), p.dropRoles(ctx, roles...))
}

// dropDatabases drops the databases WITH (FORCE), ignoring ones already gone.
func (p *Postgres) dropDatabases(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	return p.admin(ctx, func(conn *pgx.Conn) error {
		var errs []error
		for _, n := range names {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(n)+" WITH (FORCE)"); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// dropRoles drops roles with what depends on them: the databases they own, their objects and
// privileges in every other database (DROP OWNED BY), then the roles.
func (p *Postgres) dropRoles(ctx context.Context, roles ...string) error {
	if len(roles) == 0 {
		return nil
	}
	var owned, dependent []string
	err := p.admin(ctx, func(conn *pgx.Conn) error {
		var err error
		if roles, err = collect(ctx, conn, "SELECT rolname FROM pg_roles WHERE rolname = ANY($1)", roles); err != nil {
			return err
		}
		if len(roles) == 0 {
			return nil
		}
		owned, err = collect(ctx, conn, `SELECT d.datname FROM pg_database d
			JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = ANY($1)`, roles)
		if err != nil {
			return err
		}
		dependent, err = collect(ctx, conn, `SELECT DISTINCT d.datname FROM pg_shdepend s
			JOIN pg_database d ON d.oid = s.dbid JOIN pg_roles r ON r.oid = s.refobjid
			WHERE s.refclassid = 'pg_authid'::regclass AND r.rolname = ANY($1)
			  AND d.datallowconn`, roles)
		return err
	})
	if err != nil {
		return err
	}
	if len(roles) == 0 {
		return nil
	}
	if err := p.dropDatabases(ctx, owned...); err != nil {
		return err
	}
	var errs []error
	for _, db := range dependent {
		if contains(owned, db) {
			continue
		}
		errs = append(errs, p.dropOwnedIn(ctx, db, roles))
	}
	errs = append(errs, p.admin(ctx, func(conn *pgx.Conn) error {
		// Objects in the postgres database and shared privileges, then the roles.
		if _, err := conn.Exec(ctx, "DROP OWNED BY "+idents(roles)+" CASCADE"); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+idents(roles))
		return err
	}))
	return errors.Join(errs...)
}

func (p *Postgres) dropOwnedIn(ctx context.Context, db string, roles []string) error {
	conn, err := pgx.Connect(ctx, p.DSN(db))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", db, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP OWNED BY "+idents(roles)+" CASCADE")
	return err
}

func collect(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func idents(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = ident(n)
	}
	return strings.Join(q, ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
