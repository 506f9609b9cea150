package workspace

import (
	"context"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
)

// copyOwner is the role that owns a copy (the database and everything in it) and how a restore
// reaches the cluster as that role.
type copyOwner struct {
	Role string
	// libpq is the libpq environment of a database as Role (restores run as the owner, never as
	// the admin); valid only while the cluster's lifecycle lock that produced it is held. The
	// caller closes the environment.
	libpq func(ctx context.Context, database string) (*cluster.Libpq, error)
}

// forkOwnerOf is the one place that says which role owns workspace's copies on a cluster
// (../shared/DESIGN.md, "Ownership in fork copies": the workspace's own managed role on that
// cluster). Every copy method maps the parent's owner roles to what this returns; nothing else
// in the package names the role.
//
// Today it is dataenv's application role of the cluster (cluster.Cluster.AppRole). When the
// workspace roles of issue 11 exist in sidecar/internal/cluster, this returns the workspace's
// role and its credentials instead.
func forkOwnerOf(_ context.Context, l *cluster.Locked, _ string) (copyOwner, error) {
	return copyOwner{Role: l.Cluster().AppRole, libpq: l.AppLibpq}, nil
}

// templateOwnerOf is the role that owns a schema template's objects. A template is copied into
// every fork of its datatable, so once workspaces have roles of their own it must be a role no
// workspace may act as (each fork's copy is then re-owned by the fork's owner). Today it is the
// application role, which is also every fork's owner, so a fork made from a template needs no
// re-owning.
func templateOwnerOf(_ context.Context, l *cluster.Locked) (copyOwner, error) {
	return copyOwner{Role: l.Cluster().AppRole, libpq: l.AppLibpq}, nil
}
