package cluster

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// CrashAfterRenameDatabase: the database was renamed on the cluster, its record still names it
// by its old name.
const CrashAfterRenameDatabase = "cluster.rename_database.after_rename"

// RenameMarkedDatabase renames database from, which request req created (record, marker and
// recorded OID checked), to to, which must not exist, and moves its record to the new name; in
// the control transaction that moves the record, also runs (when set) so that the caller's own
// rows follow the rename atomically. It is idempotent for one request: a database already renamed
// by an earlier attempt (to carries req's marker and the OID recorded under from) only has its
// record moved, and one whose record already names to only runs also again.
func (l *Locked) RenameMarkedDatabase(ctx context.Context, from, to string, req uuid.UUID, also func(context.Context, pgx.Tx) error) error {
	c := l.cluster
	if err := validateInternalName(to); err != nil {
		return request.Refusef("rename database %q on cluster %q: %v", from, c.Name, err)
	}
	recFrom, err := l.databaseRecord(ctx, from)
	if err != nil {
		return err
	}
	recTo, err := l.databaseRecord(ctx, to)
	if err != nil {
		return err
	}
	switch {
	case recTo.Exists() && recTo.Request != req:
		return request.Refusef("rename database %q to %q on cluster %q: %q is recorded as created by request %s; it is left alone",
			from, to, c.Name, to, recTo.Request)
	case recTo.Exists() && recFrom.Exists():
		return request.Refusef("rename database %q to %q on cluster %q: both names are recorded; dataenv leaves both alone", from, to, c.Name)
	case recTo.Exists():
		return l.moveRecord(ctx, from, to, req, also) // renamed and recorded by an earlier attempt
	case !recFrom.Exists():
		return request.Refusef("rename database %q on cluster %q: it was not created by dataenv (no record); it is left alone", from, c.Name)
	case recFrom.Request != req:
		return request.Refusef("rename database %q on cluster %q: it was created by request %s, not %s; it is left alone", from, c.Name, recFrom.Request, req)
	case recFrom.OID == 0:
		return request.Refusef("rename database %q on cluster %q: its OID was never recorded; dataenv renames only databases it can identify", from, c.Name)
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	marker := markerFor(markedDatabase, req)
	stFrom, err := readDatabaseState(ctx, conn, from)
	if err != nil {
		return err
	}
	stTo, err := readDatabaseState(ctx, conn, to)
	if err != nil {
		return err
	}
	if stFrom.exists {
		if stFrom.oid != recFrom.OID || stFrom.comment != marker || (recFrom.OwnerOID != 0 && stFrom.ownerOID != recFrom.OwnerOID) {
			return request.Refusef("rename database %q on cluster %q: it is not the database dataenv recorded (OID, owner or marker differ); it is left alone", from, c.Name)
		}
		if stTo.exists {
			return request.Refusef("rename database %q to %q on cluster %q: %q exists and is not recorded by dataenv; it is left alone", from, to, c.Name, to)
		}
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(from)+" RENAME TO "+ident(to)); err != nil {
			return retryable(fmt.Errorf("rename database %q to %q on cluster %q: %w", from, to, c.Name, err))
		}
		crashpoint.HitOnce(CrashAfterRenameDatabase)
	} else if !stTo.exists || stTo.oid != recFrom.OID || stTo.comment != marker {
		// Not renamed by an earlier attempt either: the recorded database is gone.
		return request.Refusef("rename database %q to %q on cluster %q: the database recorded as %q (OID %d) is on the cluster under neither name",
			from, to, c.Name, from, recFrom.OID)
	}
	return l.moveRecord(ctx, from, to, req, also)
}

// moveRecord renames the record of from to to (when it still names from) and runs also, in one
// control transaction.
func (l *Locked) moveRecord(ctx context.Context, from, to string, req uuid.UUID, also func(context.Context, pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, l.Control(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE dataenv.managed_databases SET name = $3 WHERE cluster = $1 AND name = $2 AND created_by_request = $4`,
			l.cluster.Name, from, to, req); err != nil {
			return err
		}
		if also != nil {
			return also(ctx, tx)
		}
		return nil
	})
	if err != nil && !request.IsRefused(err) {
		return retryable(fmt.Errorf("record the rename of database %q to %q on cluster %q: %w", from, to, l.cluster.Name, err))
	}
	return err
}
