package install

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Finding is one problem preflight found, with what to do about it.
type Finding struct {
	Problem string
	Fix     string
}

func (f Finding) String() string { return f.Problem + ": " + f.Fix }

// PreflightError lists every finding at once, so an operator fixes them in one round.
type PreflightError struct{ Findings []Finding }

func (e *PreflightError) Error() string {
	lines := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		lines[i] = "  - " + f.String()
	}
	return "preflight failed:\n" + strings.Join(lines, "\n")
}

const preflightQuery = `
SELECT current_setting('wal_level'),
       current_setting('max_replication_slots')::int,
       (SELECT count(*) FROM pg_catalog.pg_replication_slots)::int,
       EXISTS (SELECT FROM pg_catalog.pg_replication_slots
                WHERE slot_name = 'dataenv_' || (SELECT oid FROM pg_catalog.pg_database
                                                  WHERE datname = current_database())::text),
       r.rolsuper, r.rolcreaterole, r.rolreplication,
       has_database_privilege(current_database(), 'CREATE'),
       current_setting('server_version_num')::int
  FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`

// Preflight checks what install and the sidecar need from the server and the connecting role.
func Preflight(ctx context.Context, conn *pgx.Conn) error {
	var (
		walLevel                           string
		maxSlots, usedSlots, serverVersion int
		ourSlot, super, createRole, repl   bool
		createOnDB                         bool
	)
	err := conn.QueryRow(ctx, preflightQuery).Scan(&walLevel, &maxSlots, &usedSlots, &ourSlot,
		&super, &createRole, &repl, &createOnDB, &serverVersion)
	if err != nil {
		return fmt.Errorf("preflight query: %w", err)
	}
	var findings []Finding
	if serverVersion < 150000 {
		findings = append(findings, Finding{fmt.Sprintf("server version %d is too old", serverVersion), "dataenv needs PostgreSQL 15 or newer"})
	}
	if walLevel != "logical" {
		findings = append(findings, Finding{fmt.Sprintf("wal_level is %q", walLevel),
			"set wal_level = logical (ALTER SYSTEM SET wal_level = logical) and restart the server"})
	}
	if !ourSlot && usedSlots >= maxSlots {
		findings = append(findings, Finding{fmt.Sprintf("all %d replication slots are in use", maxSlots),
			"raise max_replication_slots (restart needed) or drop an unused slot from pg_replication_slots"})
	}
	if !super && !(createRole && repl) {
		findings = append(findings, Finding{"the connecting role lacks privileges",
			"connect as a superuser, or as a role with CREATEROLE and REPLICATION"})
	}
	if !super && !createOnDB {
		findings = append(findings, Finding{"the connecting role cannot create schemas in this database",
			"GRANT CREATE ON DATABASE <db> TO <role>"})
	}
	if len(findings) > 0 {
		return &PreflightError{Findings: findings}
	}
	return nil
}

// IsPreflight reports whether err came from Preflight.
func IsPreflight(err error) bool {
	var p *PreflightError
	return errors.As(err, &p)
}
