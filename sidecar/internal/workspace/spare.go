package workspace

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// CrashSpareCreated: a spare's database created, its objects not re-owned to its role yet,
// still open to connections and not ready.
const CrashSpareCreated = "fork.template.spare_created"

// A spare is a TEMPLATE copy of a ready schema template, made by the refresh_schema_template
// request in the background and kept closed to connections. It and its objects belong to a role
// of its own (names.SpareRole, cluster/sparerole.go), which the template's objects are re-owned to
// in the background too. A schema_only fork of an unchanged parent whose workspace has no role on
// the cluster yet takes the spare with its role (cluster.CreateOptions.Spare and Adopt: the
// database is renamed into the fork's copy and the role into the workspace's role, in one
// transaction) instead of copying the template and re-owning its objects while the user waits,
// and asks for a refresh, which makes the next spare. A copy whose workspace role exists already
// (a second datatable on the cluster, reset_fork) takes the spare too, its role renamed for the
// copy's request (cluster.CreateOptions.SpareRoleAs); the finish re-owns that role's objects and
// drops it (finishJob.dropRole), and the copy's drop drops it if the finish did not. A spare
// made before spares had roles (role NULL) is owned by the template's owner and taken by any
// fork, which re-owns its objects. A spare is a row of dataenv.schema_templates with spare_of
// set: whatever drops an entry's templates drops its spares, and their roles, the same way
// (dropTemplate), and a refresh drops the spares of templates that are no longer current.

// readySpare is a ready spare of template t among ts, if any (the template's refresh keeps one).
func readySpare(ts []schemaTemplate, t *schemaTemplate) *schemaTemplate {
	if t == nil {
		return nil
	}
	for i := range ts {
		sp := &ts[i]
		if sp.SpareOf == t.Database && sp.Cluster == t.Cluster && sp.State == StateReady && sp.Owner == t.Owner &&
			sp.Fingerprint == t.Fingerprint {
			return sp
		}
	}
	return nil
}

// claimSpare marks spare sp taken by request req in its ledger row, before the fork renames its
// database: from then on no other fork and no refresh counts on it (a refresh drops a taken row
// whose database is still there, as it drops any spare it does not keep). Nil: no spare, or
// somebody else's already.
func claimSpare(ctx context.Context, q *pgx.Conn, sp *schemaTemplate, req uuid.UUID) (*cluster.Spare, error) {
	if sp == nil {
		return nil, nil
	}
	tag, err := q.Exec(ctx, `UPDATE dataenv.schema_templates SET state = 'taken', taken_by_request = $3
		WHERE cluster = $1 AND database = $2 AND state = 'ready' AND spare_of IS NOT NULL`, sp.Cluster, sp.Database, req)
	if err != nil {
		return nil, retryable(fmt.Errorf("claim spare %q: %w", sp.Database, err))
	}
	if tag.RowsAffected() == 0 {
		return nil, nil
	}
	return &cluster.Spare{Database: sp.Database, Request: sp.Request, Owner: sp.databaseOwner(), Role: sp.Role}, nil
}

// forgetSpare removes the ledger row of a spare that became request req's copy (its database is
// the copy's now, recorded under the copy's name).
func forgetSpare(ctx context.Context, q *pgx.Conn, sp *cluster.Spare, clusterName string, req uuid.UUID) error {
	if _, err := q.Exec(ctx, `DELETE FROM dataenv.schema_templates WHERE cluster = $1 AND database = $2 AND taken_by_request = $3`,
		clusterName, sp.Database, req); err != nil {
		return retryable(fmt.Errorf("remove the ledger row of spare %q, now a fork's copy: %w", sp.Database, err))
	}
	return nil
}

// buildSpare makes a spare of the ready template t: registered (building) with its role before
// either exists; the role (NOLOGIN, marked); a marked, private TEMPLATE copy of t owned by the
// role; the objects of t's owner re-owned to the role; closed to connections; ready. An attempt
// of this request left building was dropped by the refresh before (it keeps no spare that is not
// ready). It returns the spare's database.
func (s *Service) buildSpare(ctx context.Context, req *request.Request, rep request.Reporter, t *schemaTemplate) (string, error) {
	sp := &schemaTemplate{Cluster: t.Cluster, Database: names.SchemaTemplate(t.Workspace, t.Datatable, req.ID.String()+"/spare"),
		Workspace: t.Workspace, Datatable: t.Datatable, ParentDatabase: t.ParentDatabase, Owner: t.Owner, Fingerprint: t.Fingerprint,
		Report: t.Report, Request: req.ID, SpareOf: t.Database}
	sp.Role = names.SpareRole(sp.Workspace, sp.Database)
	started := s.cfg.Now()
	err := s.cfg.Clusters.WithLifecycleLock(ctx, sp.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		if _, err := l.Control().Exec(ctx, `INSERT INTO dataenv.schema_templates (cluster, database, workspace, datatable,
				parent_database, owner, fingerprint, created_by_request, spare_of, role) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			sp.Cluster, sp.Database, sp.Workspace, sp.Datatable, sp.ParentDatabase, sp.Owner, sp.Fingerprint, sp.Request, sp.SpareOf,
			sp.Role); err != nil {
			return retryable(fmt.Errorf("register spare %q of schema template %q: %w", sp.Database, t.Database, err))
		}
		if err := l.EnsureSpareRole(ctx, sp.Role, sp.Request); err != nil {
			return err
		}
		_, err := l.CreateMarkedDatabase(ctx, sp.Database, cluster.CreateOptions{Request: sp.Request, ForWorkspace: sp.Workspace,
			Owner: sp.Role, Template: t.Database, Private: true})
		return err
	})
	if err != nil {
		return "", err
	}
	crashpoint.HitOnce(CrashSpareCreated)
	if err := s.reownSpare(ctx, sp); err != nil {
		return "", err
	}
	if err := s.closeTemplate(ctx, sp); err != nil {
		return "", err
	}
	request.Report(ctx, rep, fmt.Sprintf("spare of schema template %s", t.Database), "done",
		fmt.Sprintf("%s in %s", sp.Database, ms(s.cfg.Now().Sub(started))))
	return sp.Database, nil
}

// reownSpare gives the spare's role what the template's owner owns in the spare, so that a fork
// taking the spare with its role has nothing to re-own. What it cannot re-own stays the
// template owner's, and the fork's finish re-owns it as it would without a spare.
func (s *Service) reownSpare(ctx context.Context, sp *schemaTemplate) error {
	conn, err := s.cfg.Clusters.Connect(ctx, sp.Cluster, sp.Database)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var triggers int
		if err := tx.QueryRow(ctx, eventTriggersSQL).Scan(&triggers); err != nil {
			return err
		}
		if triggers > 0 {
			return nil // no DDL where they could fire: the fork re-owns (it checks them too)
		}
		stmts, _, err := reownStatements(ctx, tx, []string{sp.Owner}, sp.Role)
		if err != nil {
			return err
		}
		if left := apply(ctx, tx, stmts); len(left) > 0 {
			s.log.Info("some objects of a spare keep the template's owner; forks re-own them", "spare", sp.Database, "left", len(left))
		}
		return nil
	})
	if err != nil {
		return retryable(fmt.Errorf("re-own the objects of spare %q to its role %q: %w", sp.Database, sp.Role, err))
	}
	return nil
}
