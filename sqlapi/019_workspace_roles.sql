-- Per-workspace managed roles (migrations/012_workspace_roles.up.sql): what dataenv created for
-- each workspace on each cluster, without passwords. The sidecar creates and converges them.

CREATE OR REPLACE VIEW dataenv.workspace_role_list AS
SELECT r.cluster, r.workspace, r.role, r.role_oid, r.incarnation, r.created_at,
       coalesce((SELECT array_agg(d.database ORDER BY d.database) FROM dataenv.workspace_role_databases d
                  WHERE d.cluster = r.cluster AND d.workspace = r.workspace), '{}') AS databases
  FROM dataenv.workspace_roles r;
COMMENT ON VIEW dataenv.workspace_role_list IS
    'The managed role of each workspace on each cluster it uses (jobs and members reach the cluster as it), with the databases it was granted something in. No passwords.';

REVOKE ALL ON dataenv.workspace_roles, dataenv.workspace_role_secrets, dataenv.workspace_role_databases FROM PUBLIC;
REVOKE ALL ON dataenv.workspace_role_list FROM PUBLIC;
GRANT SELECT ON dataenv.workspace_role_list TO dataenv_admin;
