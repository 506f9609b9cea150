package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// record is the control database's record of a database or datatable role dataenv created: the
// request that created it and, since they are recorded, its OID and owner at creation (0: not
// recorded yet, a record older than the columns, filled at its next touch). Names and marker
// comments can be forged by whoever owns the object (rename it, create a stand-in with the old
// name and a copied comment); an OID cannot be chosen, so every drop compares it too.
type record struct {
	Request  uuid.UUID // uuid.Nil: no record
	OID      uint32
	OwnerOID uint32
}

// Exists reports whether there is a record.
func (r record) Exists() bool { return r.Request != uuid.Nil }

const (
	databaseRecordSQL = `SELECT created_by_request, coalesce(database_oid, 0), coalesce(owner_oid, 0)
		FROM dataenv.managed_databases WHERE cluster = $1 AND name = $2`
	roleRecordSQL = `SELECT created_by_request, coalesce(role_oid, 0), 0::oid
		FROM dataenv.datatable_roles WHERE cluster = $1 AND role = $2`
)

// readRecord runs recordSQL (cluster, name → request, oid, owner oid) on the control database.
func (l *Locked) readRecord(ctx context.Context, recordSQL, what, name string) (record, error) {
	var r record
	err := l.Control().QueryRow(ctx, recordSQL, l.cluster.Name, name).Scan(&r.Request, &r.OID, &r.OwnerOID)
	if errors.Is(err, pgx.ErrNoRows) {
		return record{}, nil
	}
	if err != nil {
		return record{}, retryable(fmt.Errorf("read the record of %s %q: %w", what, name, err))
	}
	return r, nil
}

// nameOfOID returns the current name of the object with oid in catalog (pg_database or
// pg_roles), "" when it is gone.
func nameOfOID(ctx context.Context, conn *pgx.Conn, catalog string, oid uint32) (string, error) {
	col := map[string]string{"pg_database": "datname", "pg_roles": "rolname"}[catalog]
	var name string
	err := conn.QueryRow(ctx, "SELECT "+col+"::text FROM pg_catalog."+catalog+" WHERE oid = $1", oid).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", retryable(fmt.Errorf("look up OID %d in %s: %w", oid, catalog, err))
	}
	return name, nil
}

// checkIdentity refuses to act on name when it is not the object dataenv recorded: the recorded
// OID now has another name (renamed), or name is another object (a stand-in), or its owner is not
// the recorded one. what is "database" or "role"; foundOID and foundOwner describe name on the
// cluster (0 when it does not exist).
func (l *Locked) checkIdentity(ctx context.Context, conn *pgx.Conn, what, name string, rec record, foundOID, foundOwner uint32) error {
	if rec.OID == 0 {
		return nil
	}
	catalog := map[string]string{"database": "pg_database", "role": "pg_roles"}[what]
	current, err := nameOfOID(ctx, conn, catalog, rec.OID)
	if err != nil {
		return err
	}
	if current != "" && current != name {
		return request.Refusef("the %s dataenv created as %q on cluster %q (OID %d) is now named %q; dataenv leaves both alone: rename it back to %q, then try again",
			what, name, l.cluster.Name, rec.OID, current, name)
	}
	if foundOID != 0 && foundOID != rec.OID {
		return request.Refusef("%s %q on cluster %q is not the one dataenv created (OID %d, recorded %d): it was replaced by another %s of the same name; dataenv leaves it alone",
			what, name, l.cluster.Name, foundOID, rec.OID, what)
	}
	if foundOID != 0 && rec.OwnerOID != 0 && foundOwner != rec.OwnerOID {
		return request.Refusef("%s %q on cluster %q changed owner (OID %d, recorded owner OID %d); dataenv leaves it alone: give it back to the managed application role first",
			what, name, l.cluster.Name, foundOwner, rec.OwnerOID)
	}
	return nil
}

// SetDatabaseOwner gives database name (recorded, carrying its marker, its identity checked) to
// role and records the new owner, so that later drops still recognize it. It is how code that
// hands a database dataenv created to another role must change its owner: an ALTER DATABASE ...
// OWNER behind the record's back makes every later drop refuse the database.
func (l *Locked) SetDatabaseOwner(ctx context.Context, name, role string) error {
	rec, err := l.databaseRecord(ctx, name)
	if err != nil {
		return err
	}
	if !rec.Exists() {
		return request.Refusef("database %q on cluster %q was not created by dataenv; its owner is left alone", name, l.cluster.Name)
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := readDatabaseState(ctx, conn, name)
	if err != nil {
		return err
	}
	if !st.exists || st.comment != markerFor(markedDatabase, rec.Request) {
		return request.Refusef("database %q on cluster %q is missing or does not carry dataenv's marker; its owner is left alone", name, l.cluster.Name)
	}
	owner := st.ownerOID
	if st.owner == role {
		owner = rec.OwnerOID // an earlier attempt changed it and did not record it: converge
	}
	if err := l.checkIdentity(ctx, conn, "database", name, rec, st.oid, owner); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" OWNER TO "+ident(role)); err != nil {
		return fmt.Errorf("give database %q of cluster %q to %q: %w", name, l.cluster.Name, role, err)
	}
	if st, err = readDatabaseState(ctx, conn, name); err != nil {
		return err
	}
	_, err = l.Control().Exec(ctx, `UPDATE dataenv.managed_databases SET database_oid = $3, owner_oid = $4 WHERE cluster = $1 AND name = $2`,
		l.cluster.Name, name, st.oid, st.ownerOID)
	if err != nil {
		return retryable(fmt.Errorf("record the owner of database %q of cluster %q: %w", name, l.cluster.Name, err))
	}
	return nil
}

// convergeManagedRole is convergeRole for one of the two managed roles, checked against the OID
// setup recorded for it (dataenv.clusters.app_role_oid, replication_role_oid): a role renamed
// away and replaced by a stand-in with a copied marker is refused, not given the password and
// the databases. The OID is recorded once the role is converged.
func (l *Locked) convergeManagedRole(ctx context.Context, conn *pgx.Conn, r managedRole) (StepResult, error) {
	step := StepResult{Name: "role " + r.name}
	col := ident(r.secret + "_role_oid")
	var recorded uint32
	if err := l.Control().QueryRow(ctx, `SELECT coalesce(`+col+`, 0) FROM dataenv.clusters WHERE name = $1`, l.cluster.Name).Scan(&recorded); err != nil {
		return step, retryable(fmt.Errorf("read the recorded OID of role %q: %w", r.name, err))
	}
	st, err := readRoleState(ctx, conn, r.name)
	if err != nil {
		return step, retryable(err)
	}
	if err := l.checkIdentity(ctx, conn, "role", r.name, record{OID: recorded}, st.oid, 0); err != nil {
		step.Status, step.Detail = StatusRefused, err.Error()
		return step, nil
	}
	step, err = l.convergeRole(ctx, conn, r)
	if err != nil || step.Status == StatusRefused {
		return step, err
	}
	if st, err = readRoleState(ctx, conn, r.name); err != nil || !st.exists {
		return step, retryable(fmt.Errorf("read role %q after converging it: %v", r.name, err))
	}
	if _, err := l.Control().Exec(ctx, `UPDATE dataenv.clusters SET `+col+` = $2 WHERE name = $1`, l.cluster.Name, st.oid); err != nil {
		return step, retryable(fmt.Errorf("record the OID of role %q: %w", r.name, err))
	}
	return step, nil
}
