package dispatch

import (
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/internal/satellite"
)

// A satellite envelope is classed by the kind it carries: its run takes a job slot and counts
// against the satellite caller (qualified by the satellite's database) and the workspace it
// carries, its ping runs on the remote workers (it waits for a satellite connection), never on
// the control-plane ones.
func TestSatelliteEnvelopeIsClassedByItsInnerKind(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{cfg: Config{JobKinds: []string{"run", "materialize"}, SchedulingKind: satellite.SchedulingKind,
		Remote: satellite.IsEnvelope}}
	envelope := func(kind string) request.Request {
		return request.Request{Kind: satellite.Kind, RequestedBy: "dataenv_satellite_x",
			Args: []byte(`{"database_oid": "16384", "request_id": "r", "xact": "7", "protocol": 1, "kind": "` + kind + `"}`)}
	}
	cases := []struct {
		name string
		req  request.Request
		want int
	}{
		{"satellite run", envelope("run"), classJob},
		{"satellite materialize", envelope("materialize"), classJob},
		{"satellite ping", envelope("ping"), classRemote},
		{"envelope without a kind", request.Request{Kind: satellite.Kind, Args: []byte(`{}`)}, classRemote},
		{"control run", request.Request{Kind: "run", Args: []byte(`{"workspace": "w"}`)}, classJob},
		{"control ping", request.Request{Kind: "ping"}, classControl},
	}
	for _, c := range cases {
		if got := d.classOf(c.req); got != c.want {
			t.Errorf("%s: class %d, want %d", c.name, got, c.want)
		}
	}
	d.cfg.SchedulingOwner = satellite.SchedulingOwner
	if o := d.ownerOf(envelope("run")); o.user != "dataenv_satellite_x" || o.workspace != "" {
		t.Errorf("owner of an envelope without hints: %+v, want the satellite's login role and no workspace", o)
	}
	hinted := request.Request{Kind: satellite.Kind, RequestedBy: "dataenv_satellite_x",
		Args: []byte(`{"database_oid": "16384", "kind": "run", "requested_by": "alice", "workspace": "w"}`)}
	if o := d.ownerOf(hinted); o.user != "16384/alice" || o.workspace != "w" {
		t.Errorf("owner of a satellite run: %+v, want 16384/alice in workspace w", o)
	}
	if o := d.ownerOf(request.Request{Kind: "run", RequestedBy: "alice", Args: []byte(`{"workspace": "w"}`)}); o.user != "alice" || o.workspace != "w" {
		t.Errorf("owner of a control run: %+v, want alice in workspace w", o)
	}
}
