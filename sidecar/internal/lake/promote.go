package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// SourceAlias is the alias under which a promote job attaches the fork's namespace READ_ONLY.
func SourceAlias(lake, fork string) string { return names.AncestorAlias(lake, fork) }

// sourceAttach attaches the namespace of the target lake of workspace res.target.ReadFrom (a fork
// of the job's workspace, promote) READ_ONLY under SourceAlias: the job's workspace role is given
// read access to it first (Access.Grant; the caller revokes it with Access.Revoke once the job is
// over), and its data path is a read-only directory of the job.
func (res *resolution) sourceAttach(ctx context.Context) (string, error) {
	from, name := res.target.ReadFrom, res.target.Lake
	ws, err := control.ReadWorkspace(ctx, res.r.Control, from)
	if err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return "", request.Refusef("no workspace named %q", from)
		}
		return "", request.Retryable(err)
	}
	if ws.Parent != res.ws.ID {
		return "", request.Refusef("workspace %q is not a fork of %q", from, res.ws.ID)
	}
	lakes, err := control.ReadLakes(ctx, res.r.Control, []string{from}, name)
	if err != nil {
		return "", request.Retryable(err)
	}
	l, ok := lakes[from][name]
	if !ok || !Isolated(*ws, l) {
		return "", request.Refusef("fork %q has no isolated lake named %q", from, name)
	}
	s, err := res.storage(ctx, l.Storage)
	if err != nil {
		return "", err
	}
	ns := namespaceOf(from, true, l, s)
	exists, err := res.namespaceExists(ctx, ns)
	if err != nil {
		return "", request.Retryable(err)
	}
	if !exists {
		return "", request.Refusef("fork %q has no namespace of lake %q (nothing was materialized in it)", from, name)
	}
	if _, err := res.r.Access.Grant(ctx, ns, res.ws.ID, AccessRead, res.rep); err != nil {
		return "", err
	}
	if err := res.plan.addDir(ns, false); err != nil {
		return "", err
	}
	cc, err := res.cats.Conn(ctx, l.CatalogCluster, l.CatalogDatabase)
	if err != nil {
		return "", err
	}
	res.plan.Source = &ns
	opts := append(ns.readOnlyOptions(), Option{"META_SECRET", Literal(cc.Secret)})
	return Render(true, "ducklake:postgres:"+cc.Path, SourceAlias(name, from), opts), nil
}

const accessOfSQL = `
SELECT access FROM dataenv.lake_namespace_access
 WHERE catalog_cluster = $1 AND catalog_database = $2 AND metadata_schema = $3 AND workspace = $4`

// Revoke takes back the read access of workspace's role to ns that Grant gave (promote gives the
// parent's role read access to the fork's namespace for one job): the table privileges, the
// schema's USAGE, the default privileges of the namespace's writers to the role, and its record
// in dataenv.lake_namespace_access. A write access (the workspace's own namespace) is never
// revoked; nothing recorded is nothing to do.
func (a *Access) Revoke(ctx context.Context, ns Namespace, workspace string, rep request.Reporter) error {
	err := a.clusters.WithLifecycleLock(ctx, ns.Lake.CatalogCluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		var access string
		err := l.Control().QueryRow(ctx, accessOfSQL, ns.Lake.CatalogCluster, ns.Lake.CatalogDatabase, ns.SchemaName(), workspace).Scan(&access)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && access != AccessRead) {
			return nil
		}
		if err != nil {
			return request.Retryable(err)
		}
		role, err := l.EnsureWorkspaceRole(ctx, workspace)
		if err != nil {
			return err
		}
		peers, err := namespacePeers(ctx, l.Control(), ns)
		if err != nil {
			return err
		}
		conn, err := l.Connect(ctx, ns.Lake.CatalogDatabase)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		sid, rid := pgx.Identifier{ns.SchemaName()}.Sanitize(), pgx.Identifier{role.Name}.Sanitize()
		var stmts []string
		for _, p := range peers {
			if p.Access == AccessWrite && p.Role != role.Name {
				stmts = append(stmts, fmt.Sprintf("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s REVOKE ALL ON TABLES FROM %s",
					pgx.Identifier{p.Role}.Sanitize(), sid, rid))
			}
		}
		stmts = append(stmts, "REVOKE ALL ON ALL TABLES IN SCHEMA "+sid+" FROM "+rid, "REVOKE USAGE ON SCHEMA "+sid+" FROM "+rid)
		if _, err := conn.Exec(ctx, strings.Join(stmts, ";\n")); err != nil {
			return fmt.Errorf("revoke the read access of %s to schema %s: %w", role.Name, ns.SchemaName(), err)
		}
		_, err = l.Control().Exec(ctx, `DELETE FROM dataenv.lake_namespace_access
			WHERE catalog_cluster = $1 AND catalog_database = $2 AND metadata_schema = $3 AND workspace = $4`,
			ns.Lake.CatalogCluster, ns.Lake.CatalogDatabase, ns.SchemaName(), workspace)
		return request.Retryable(err)
	})
	a.Forget()
	if err != nil {
		return fmt.Errorf("lake %q: take back workspace %q's read access to %s: %w", ns.Lake.Name, workspace, ns.SchemaName(), err)
	}
	return nil
}

// RevokeSource takes back the read access to target.ReadFrom's namespace that resolving target for
// workspace gave its role (sourceAttach), whether or not the resolution or the job finished.
func (r *Resolver) RevokeSource(ctx context.Context, workspace string, target *Target, rep request.Reporter) error {
	lakes, err := control.ReadLakes(ctx, r.Control, []string{target.ReadFrom}, target.Lake)
	if err != nil {
		return request.Retryable(err)
	}
	l, ok := lakes[target.ReadFrom][target.Lake]
	if !ok || l.ForkBehavior == "shared" {
		return nil
	}
	s, err := control.ReadStorage(ctx, r.Control, l.Storage)
	if err != nil {
		return request.Retryable(err)
	}
	return r.Access.Revoke(ctx, namespaceOf(target.ReadFrom, true, l, s), workspace, rep)
}
