package app

import (
	"context"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
)

// boundClusters is the cluster administrator as the job resolver sees it: every database a job
// reaches through a workspace's binding (a datatable, a lake catalog) is checked before dataenv
// hands out a connection to it (cluster.Admin.BoundLibpq: never a template or a database holding
// a dataenv installation, whatever the binding says).
type boundClusters struct{ *cluster.Admin }

func (b boundClusters) Libpq(ctx context.Context, clusterName, database string) (*cluster.Libpq, error) {
	return b.BoundLibpq(ctx, clusterName, database)
}
