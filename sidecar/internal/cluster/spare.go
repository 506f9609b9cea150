package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
)

// Crash points of taking a spare (CreateOptions.Spare).
const (
	CrashAfterSpareUnrecorded = "cluster.create_database.after_spare_unrecorded" // spare's record removed, database untouched
	CrashAfterSpareTaken      = "cluster.create_database.after_spare_taken"      // spare renamed to the new name and marked, not recorded
)

// Spare is a database made beforehand by request Request (recorded, carrying its marker, owned
// by Owner, closed to connections: ALLOW_CONNECTIONS false) that a CreateMarkedDatabase takes
// instead of copying its template while the caller waits. The caller makes sure nothing else
// takes it (dataenv's own ledger of spares) and that it holds what the new database must.
type Spare struct {
	Database string
	Request  uuid.UUID
	Owner    string
	// Role is the spare's own role (sparerole.go), which owns it and its objects ("" for a spare
	// made before spares had roles). Such a spare is taken only together with its role
	// (CreateOptions.Adopt).
	Role string
}

// takeSpare makes opts.Spare the new database name of opts.Request (marked with marker), owned
// by the new owner and open to connections; false: the spare is not there as recorded (nothing
// was changed, and the caller creates the database instead).
//
// The spare's record goes first, then one transaction opens, re-owns and renames it (through the
// request's staging name, as a database created for it is: markAndRename). A crash in between
// leaves the spare unrecorded under its own name with its own marker, which the cleanup of the
// spare's ledger row adopts and drops (as any database created and not recorded yet); a crash
// after leaves name with this request's marker, not recorded yet, which the request's own re-run
// adopts, and nothing under the spare's name. The record is never left naming a database that
// was renamed away (checkIdentity would refuse every later drop of that name).
//
// A spare with a role of its own is taken only with its role (sparerole.go): the same
// transaction renames the role into the workspace role (opts.Adopt), so the workspace role never
// owns objects of a database that is not its copy, or, when the workspace role exists, into a
// name of the request's (opts.SpareRoleAs), so that no spare's record names a role that owns a
// copy. A crash leaves either the spare and its role as they were or the marked copy and the role
// that owns its objects, named after the copy's request.
func (l *Locked) takeSpare(ctx context.Context, conn *pgx.Conn, staging, name, marker string, opts CreateOptions) (bool, error) {
	sp := opts.Spare
	rec, err := l.databaseRecord(ctx, sp.Database)
	if err != nil {
		return false, err
	}
	st, err := readDatabaseState(ctx, conn, sp.Database)
	if err != nil {
		return false, err
	}
	if !rec.Exists() || rec.Request != sp.Request || !st.exists || st.comment != markerFor(markedDatabase, sp.Request) ||
		st.owner != sp.Owner || (rec.OID != 0 && rec.OID != st.oid) {
		return false, nil
	}
	adopt := sp.Role != "" && opts.Adopt != nil
	if sp.Role != "" {
		if ok, err := spareRoleTakeable(ctx, conn, sp, opts.spareRoleTo()); err != nil || !ok {
			return false, err
		}
	}
	if _, err := l.Control().Exec(ctx, `DELETE FROM dataenv.managed_databases WHERE cluster = $1 AND name = $2 AND created_by_request = $3`,
		l.cluster.Name, sp.Database, sp.Request); err != nil {
		return false, retryable(fmt.Errorf("remove the record of spare database %q of cluster %q: %w", sp.Database, l.cluster.Name, err))
	}
	crashpoint.HitOnce(CrashAfterSpareUnrecorded)
	db := ident(sp.Database)
	stmts := append(spareRoleStatements(sp, opts),
		"ALTER DATABASE "+db+" ALLOW_CONNECTIONS true",
		"ALTER DATABASE "+db+" OWNER TO "+ident(opts.owner(l.cluster)),
		"ALTER DATABASE "+db+" RENAME TO "+ident(staging),
	)
	stmts = append(stmts, markAndRename(staging, name, marker, opts.Private)...)
	if _, err := conn.Exec(ctx, strings.Join(stmts, ";\n")); err != nil {
		return false, retryable(fmt.Errorf("take spare database %q of cluster %q as %q: %w", sp.Database, l.cluster.Name, staging, err))
	}
	crashpoint.HitOnce(CrashAfterSpareTaken)
	if adopt {
		if err := l.settleAdopted(ctx, conn, opts.Adopt); err != nil {
			return false, err
		}
	}
	return true, nil
}
