package workspace

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Use kinds dataenv.managed_database_uses__workspaces reports.
const (
	UseDatatable  = "datatable"
	UseForkCopy   = "fork copy"
	UseForkParent = "fork parent"
)

// dropCopy drops the database of a registered copy (guarded: dataenv_fork_ prefix, control
// record and marker of the request that registered it, nothing else using it) and removes its
// registry row only after the drop succeeded, all under the cluster's lifecycle lock.
func (s *Service) dropCopy(ctx context.Context, rep request.Reporter, c Copy) error {
	err := s.cfg.Clusters.WithLifecycleLock(ctx, c.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		if err := dropCopyLocked(ctx, l, c); err != nil {
			return err
		}
		return unregisterCopy(ctx, l.Control(), c)
	})
	s.count(metrics.OpDropForkCopy, true, err)
	return err
}

// dropCopyLocked drops the copy's database if it exists. A database this request created but
// did not record yet (a crash between CREATE DATABASE and the record) is first adopted through
// the cluster package, which recognizes it by its marker or its staging name.
// Uses in also (reset_fork: the fork's own datatable entry) do not keep it from being dropped.
// The registry row is marked dropping first: until the caller removes it, it must not say ready
// for a database that may be gone (a create_fork that runs again after its rollback was
// interrupted would keep it as done). A refused drop, which dropped nothing, puts the row's
// state back.
func dropCopyLocked(ctx context.Context, l *cluster.Locked, c Copy, also ...cluster.Use) error {
	if !strings.HasPrefix(c.Database, names.ForkPrefix) {
		return request.Refusef("registry row names database %q on cluster %q, which is not a fork database (%s*); it is left alone",
			c.Database, c.Cluster, names.ForkPrefix)
	}
	if err := setCopyState(ctx, l.Control(), c, StateDropping); err != nil {
		return err
	}
	err := dropCopyDatabase(ctx, l, c, also...)
	if request.IsRefused(err) && c.State != "" && c.State != StateDropping {
		if serr := setCopyState(ctx, l.Control(), c, c.State); serr != nil {
			return fmt.Errorf("%w (and its registry row stays %s: %v)", err, StateDropping, serr)
		}
	}
	return err
}

func setCopyState(ctx context.Context, q *pgx.Conn, c Copy, state string) error {
	if _, err := q.Exec(ctx, `UPDATE dataenv.fork_copies SET state = $4 WHERE cluster = $1 AND database = $2 AND created_by_request = $3`,
		c.Cluster, c.Database, c.Request, state); err != nil {
		return retryable(fmt.Errorf("mark fork copy %q %s: %w", c.Database, state, err))
	}
	return nil
}

// dropCopyDatabase is dropCopyLocked once the registry row says dropping.
func dropCopyDatabase(ctx context.Context, l *cluster.Locked, c Copy, also ...cluster.Use) error {
	rec, err := recordOf(ctx, l.Control(), c)
	if err != nil {
		return err
	}
	switch {
	case rec == uuid.Nil:
		found, err := existsOnCluster(ctx, l, c.Database, stagingName(c.Request))
		if err != nil || !found {
			return err // nothing was created: nothing to drop
		}
		// The copy was created owned by the fork's workspace role (forkOwnerOf), recorded before.
		var owner string
		if err := l.Control().QueryRow(ctx, `SELECT coalesce((SELECT role FROM dataenv.workspace_roles WHERE cluster = $1 AND workspace = $2), '')`,
			c.Cluster, c.Workspace).Scan(&owner); err != nil {
			return retryable(fmt.Errorf("read the role of workspace %q: %w", c.Workspace, err))
		}
		if _, err := l.CreateMarkedDatabase(ctx, c.Database, cluster.CreateOptions{Request: c.Request, ForWorkspace: c.Workspace,
			Owner: owner}); err != nil {
			return fmt.Errorf("adopt the interrupted fork copy %q before dropping it: %w", c.Database, err)
		}
	case rec != c.Request:
		return request.Refusef("database %q on cluster %q was created by request %s, not by the fork request %s that registered it; it is left alone",
			c.Database, c.Cluster, rec, c.Request)
	}
	if _, err = l.DropMarkedDatabase(ctx, c.Database, cluster.DropOptions{
		Exempt:            append([]cluster.Use{{Kind: UseForkCopy, Name: c.Workspace}}, also...),
		TerminateSessions: true,
	}); err != nil || !mayHaveTakenASpare(c) {
		return err
	}
	return dropTakenSpareRole(ctx, l, c)
}

// mayHaveTakenASpare: a schema_only copy made from its schema template, or whose method was not
// recorded yet (a crash right after the take).
func mayHaveTakenASpare(c Copy) bool {
	return c.Mode == ModeSchemaOnly && (c.Method == "" || c.Method == MethodSchemaTemplate)
}

// dropTakenSpareRole drops the role of a spare the copy took, renamed for the copy's request
// (names.TakenSpareRole), if the copy's finish did not: a crash before it, or an object the
// re-own could not move. A role of that name without the request's marker is not dataenv's for
// this copy and is left alone.
func dropTakenSpareRole(ctx context.Context, l *cluster.Locked, c Copy) error {
	err := l.DropSpareRole(ctx, names.TakenSpareRole(c.Workspace, c.Request.String(), c.Datatable), c.Request)
	if request.IsRefused(err) {
		return nil
	}
	return err
}

// recordOf returns the request of the control record of the copy's database (uuid.Nil if none).
func recordOf(ctx context.Context, conn *pgx.Conn, c Copy) (uuid.UUID, error) {
	var id uuid.UUID
	err := conn.QueryRow(ctx, `SELECT created_by_request FROM dataenv.managed_databases WHERE cluster = $1 AND name = $2`,
		c.Cluster, c.Database).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, nil
	}
	if err != nil {
		return uuid.Nil, retryable(fmt.Errorf("read the record of database %q: %w", c.Database, err))
	}
	return id, nil
}

// stagingName is the cluster package's name of a database between CREATE DATABASE and its rename
// (see sidecar/cluster, "create_database: check, act, record").
func stagingName(req uuid.UUID) string { return "dataenv_tmp_" + hex.EncodeToString(req[:]) }

// existsOnCluster reports whether any of the databases exists on the locked cluster.
func existsOnCluster(ctx context.Context, l *cluster.Locked, dbs ...string) (bool, error) {
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var found bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = ANY($1))`, dbs).Scan(&found); err != nil {
		return false, retryable(fmt.Errorf("look for databases on cluster %q: %w", l.Cluster().Name, err))
	}
	return found, nil
}

// copyFailure is a copy whose cleanup failed, for reports.
type copyFailure struct {
	Copy
	Error string `json:"error"`
	err   error  // the drop's error, whose kind (transient or final) decides the request's fate
}

// allTransient reports whether every failure is one another attempt can cure.
func allTransient(failed []copyFailure) bool {
	for _, f := range failed {
		if !request.IsTransient(f.err) {
			return false
		}
	}
	return true
}

// dropCopies drops every copy, continuing past failures, and returns the ones dropped and the
// ones that failed.
func (s *Service) dropCopies(ctx context.Context, rep request.Reporter, copies []Copy) (dropped []Copy, failed []copyFailure) {
	for _, c := range copies {
		step := fmt.Sprintf("drop fork copy %s on cluster %s", c.Database, c.Cluster)
		if err := s.dropCopy(ctx, rep, c); err != nil {
			request.Report(ctx, rep, step, "failed", err.Error())
			failed = append(failed, copyFailure{Copy: c, Error: err.Error(), err: err})
			continue
		}
		request.Report(ctx, rep, step, "dropped", "datatable "+c.Datatable+" of workspace "+c.Workspace)
		dropped = append(dropped, c)
	}
	return dropped, failed
}

// failureText lists failed cleanups in an error text.
func failureText(failed []copyFailure) string {
	parts := make([]string, len(failed))
	for i, f := range failed {
		parts[i] = fmt.Sprintf("%s on cluster %s: %s", f.Database, f.Cluster, f.Error)
	}
	return strings.Join(parts, "; ")
}
