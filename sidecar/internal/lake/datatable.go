package lake

import (
	"context"
	"errors"
	"fmt"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// datatableAttach resolves one ATTACH 'datatable://<name>' into a postgres attach of the
// datatable's database for the workspace (TLS settings of its cluster included), as the
// workspace's role on that cluster, after giving it what the datatable grants
// (cluster.Locked.GrantDatatable).
func (res *resolution) datatableAttach(ctx context.Context, name string, a *Attach) (string, error) {
	dt, err := control.ResolveDatatable(ctx, res.r.Control, res.ws.ID, name)
	if errors.Is(err, control.ErrNotFound) {
		return "", request.Refusef("ATTACH %s: workspace %q has no datatable named %q", Literal(a.Path), res.ws.ID, name)
	}
	if err != nil {
		return "", request.Retryable(fmt.Errorf("resolve datatable %q: %w", name, err))
	}
	if err := res.r.Clusters.GrantDatatable(ctx, dt.Cluster, res.ws.ID, dt.Database); err != nil {
		return "", fmt.Errorf("datatable %q: %w", name, err)
	}
	cc, err := res.cats.Conn(ctx, dt.Cluster, dt.Database)
	if err != nil {
		return "", err
	}
	opts := append([]Option{{"TYPE", "postgres"}}, withoutOptions(a.Options, "TYPE", "SECRET")...)
	opts = append(opts, Option{"SECRET", Literal(cc.Secret)})
	return Render(a.IfNotExists, cc.Path, a.Alias, opts), nil
}
