package workspace

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
)

// foreignRolesSQL lists the managed roles of other workspaces (names starting with $1) that own
// something or hold a privilege in the connected database, other than the copy's owner ($2) and
// the parent's owner roles ($3: mapped to the owner, or reported when they could not be).
const foreignRolesSQL = `
SELECT r.rolname::text, count(*)::int
  FROM pg_catalog.pg_shdepend s JOIN pg_catalog.pg_roles r ON r.oid = s.refobjid
 WHERE s.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
   AND s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND s.deptype IN ('a', 'o')
   AND pg_catalog.starts_with(r.rolname, $1) AND r.rolname <> $2 AND r.rolname <> ALL ($3)
 GROUP BY 1 ORDER BY 1`

// foreignRoles reads foreignRolesSQL for the copy as "role (n entries)".
func (j finishJob) foreignRoles(ctx context.Context, tx pgx.Tx) ([]string, error) {
	owners := make([]string, 0, len(j.plan.OwnerRoles))
	for _, o := range j.plan.OwnerRoles {
		owners = append(owners, o.Name)
	}
	rows, err := tx.Query(ctx, foreignRolesSQL, names.WorkspaceRolePrefix, j.owner, owners)
	if err != nil {
		return nil, fmt.Errorf("other workspaces' roles in the copy: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var role string
		var n int
		err := r.Scan(&role, &n)
		return fmt.Sprintf("%s (%d entries)", role, n), err
	})
}

// shutOutForeignRoles makes sure the finished copy gives no other workspace's role anything:
// those grants were left out of the plan (withoutWorkspaceRoles) and taken away by the ACL pass,
// but the copy is checked as it is, not as planned. Whatever is still there gets a second ACL
// pass; if that leaves any, the copy is refused rather than handed over, since the other
// workspace's members would reach this fork's data.
func (j finishJob) shutOutForeignRoles(ctx context.Context, tx pgx.Tx) ([]notCarried, error) {
	found, err := j.foreignRoles(ctx, tx)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	acts, err := j.aclStatements(ctx, tx)
	if err != nil {
		return nil, err
	}
	left := append(acts.left, apply(ctx, tx, acts.stmts)...)
	still, err := j.foreignRoles(ctx, tx)
	if err != nil {
		return nil, err
	}
	if len(still) > 0 {
		return nil, fmt.Errorf("the copy still gives other workspaces' roles privileges or objects: %s; dataenv does not hand a fork's data to another workspace (not carried: %v)",
			strings.Join(still, ", "), left)
	}
	return left, nil
}
