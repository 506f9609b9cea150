package satellite

import (
	"encoding/json"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// SchedulingOwner is who and where a job counts against for the dispatcher's per-user and
// per-workspace caps (dispatch.Config.SchedulingOwner). A control request: its requester and
// args.workspace. An envelope: the satellite row's requester, qualified by the satellite's
// database OID (a role of one name in two satellites is two users: each satellite decides who
// may use it), and the row's workspace, a control workspace, so a workspace's jobs share one cap
// wherever they were made. Both are hints the sidecar checks against the row before the job runs
// (mismatched); an envelope without them (none passes validate_satellite) counts against the
// satellite's login role.
func SchedulingOwner(req request.Request) (user, workspace string) {
	if req.Kind != Kind {
		var a struct {
			Workspace string `json:"workspace"`
		}
		_ = json.Unmarshal(req.Args, &a)
		return req.RequestedBy, a.Workspace
	}
	var hints struct {
		DatabaseOID string `json:"database_oid"`
		RequestedBy string `json:"requested_by"`
		Workspace   string `json:"workspace"`
	}
	if err := json.Unmarshal(req.Args, &hints); err != nil || hints.RequestedBy == "" || hints.DatabaseOID == "" {
		return req.RequestedBy, ""
	}
	return hints.DatabaseOID + "/" + hints.RequestedBy, hints.Workspace
}
