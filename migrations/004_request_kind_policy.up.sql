-- Each request kind declares who may make it (its authorization policy), checked against the
-- request's requested_by at insert time and again by the sidecar before every attempt
-- (dataenv.authorize_request, sqlapi/001_request_kinds.sql):
--   any              every dataenv user (a member of dataenv_user or an administrator)
--   admin            dataenv administrators only (superusers, dataenv_admin, the schema owner)
--   workspace_member members of the workspace named by the argument workspace_arg (and admins)
--   workspace_owner  the owner of that workspace (and admins)
-- A kind that declares nothing is admin-only: a forgotten policy fails closed.
ALTER TABLE dataenv.request_kinds
    ADD COLUMN policy text NOT NULL DEFAULT 'admin'
        CHECK (policy IN ('any', 'admin', 'workspace_member', 'workspace_owner')),
    ADD COLUMN workspace_arg text
        CHECK (workspace_arg ~ '^[a-z][a-z0-9_]*$'),
    ADD CONSTRAINT request_kinds_policy_workspace_arg_check
        CHECK ((policy IN ('workspace_member', 'workspace_owner')) = (workspace_arg IS NOT NULL));
