package app

import (
	"context"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
)

// boundClusters is the cluster administrator as the job resolver sees it: every database a job
// reaches through a workspace's binding (a datatable, a lake catalog) is checked before dataenv
// hands out a connection to it, as the workspace's role (cluster.Admin.BoundWorkspaceLibpq: never a
// template or a database holding a dataenv installation, whatever the binding says). The grants
// made before (GrantDatatable, the lake namespace grants) check it themselves.
type boundClusters struct{ *cluster.Admin }

func (b boundClusters) WorkspaceLibpq(ctx context.Context, clusterName, workspace, database string) (*cluster.Libpq, error) {
	return b.BoundWorkspaceLibpq(ctx, clusterName, workspace, database)
}
