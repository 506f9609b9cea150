package workspace

import (
	"sort"
	"strings"

	"github.com/dataenv/dataenv/sidecar/names"
)

// withoutWorkspaceRoles takes out of the plan what the parent grants to other workspaces'
// managed roles (names.WorkspaceRolePrefix) that own nothing there: privileges (as grantee or
// grantor), default privileges, the database's access list and their role settings. dataenv gave
// them those (cluster.Locked.GrantDatatable, for that workspace's own use of the parent); in a
// copy they would let another workspace reach this fork's data, and a copy holding grants to a
// role blocks that role's drop. A workspace role that owns something in the parent (the parent is
// itself a fork's copy) is an owner role and is mapped like any other. Each role left out is
// reported.
func (p *parentPlan) withoutWorkspaceRoles() {
	owners := map[string]bool{}
	for _, o := range p.OwnerRoles {
		owners[o.Name] = true
	}
	left := map[string]bool{}
	drop := func(role string) bool {
		if strings.HasPrefix(role, names.WorkspaceRolePrefix) && !owners[role] {
			left[role] = true
			return true
		}
		return false
	}
	filter := func(items []aclItem) []aclItem {
		if items == nil {
			return nil
		}
		out := make([]aclItem, 0, len(items))
		for _, it := range items {
			if drop(it.Grantee) || drop(it.Grantor) {
				continue
			}
			out = append(out, it)
		}
		return out
	}
	for _, o := range p.ObjectACLs {
		o.Items = filter(o.Items)
	}
	for i := range p.DefaultACLs {
		p.DefaultACLs[i].Items = filter(p.DefaultACLs[i].Items)
	}
	p.DatabaseACL = filter(p.DatabaseACL)
	settings := p.RoleSett[:0]
	for _, rs := range p.RoleSett {
		if !drop(rs.Role) {
			settings = append(settings, rs)
		}
	}
	p.RoleSett = settings
	roles := make([]string, 0, len(left))
	for r := range left {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		p.WorkspaceRolesLeft = append(p.WorkspaceRolesLeft, notCarried{Object: "privileges and settings of workspace role " + r,
			Reason: "another workspace's managed role: dataenv gives each workspace's role what its datatables grant it, and a copy belongs to its own workspace"})
	}
}
