-- Workspace lifecycle: protection and fork expiry (sqlapi/060_workspace_protection.sql,
-- sqlapi/061_fork_expiry.sql).
--
-- protected: a protected workspace cannot be dropped, expired or have its datatables and lakes
-- removed (dataenv.protect_workspace / unprotect_workspace). expires_at: when the leader sidecar
-- files a drop_fork for the fork (NULL: never); only forks expire. Existing rows keep living:
-- unprotected, no expiry.
ALTER TABLE dataenv.workspaces
    ADD COLUMN protected    boolean NOT NULL DEFAULT false,
    ADD COLUMN protected_by name,
    ADD COLUMN protected_at timestamptz,
    ADD COLUMN expires_at   timestamptz,
    ADD CONSTRAINT workspaces_expires_at_fork_check CHECK (expires_at IS NULL OR is_fork),
    ADD CONSTRAINT workspaces_protected_by_check CHECK (protected = (protected_by IS NOT NULL));
CREATE INDEX workspaces_expires_at_idx ON dataenv.workspaces (expires_at) WHERE expires_at IS NOT NULL;

-- The expiry policy of forks created under a workspace, set by administrators
-- (dataenv.set_workspace_policy). A fork takes the policy of its nearest ancestor that has one
-- (its parent first). default_fork_expiry applies when create_fork is given no expires_in;
-- max_fork_expiry bounds how far ahead a fork's expiry may be (create_fork, set_fork_expiry).
CREATE TABLE dataenv.workspace_policies (
    workspace           text PRIMARY KEY REFERENCES dataenv.workspaces (id) ON DELETE CASCADE ON UPDATE CASCADE,
    default_fork_expiry interval CHECK (default_fork_expiry > interval '0'),
    max_fork_expiry     interval CHECK (max_fork_expiry > interval '0'),
    set_by              name NOT NULL,
    set_at              timestamptz NOT NULL DEFAULT now(),
    CHECK (default_fork_expiry IS NOT NULL OR max_fork_expiry IS NOT NULL)
);

-- The drop_fork requests the sidecar filed for expired forks: the ledger that shows them to the
-- fork's members (recorded with the members of the moment, since the fork and its member list are
-- gone once the drop succeeded) and that keeps a second drop from being filed.
CREATE TABLE dataenv.fork_expirations (
    request_id uuid PRIMARY KEY,
    fork       text NOT NULL,
    expires_at timestamptz NOT NULL,
    -- the fork's owner and members when the drop was filed
    members    name[] NOT NULL,
    filed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fork_expirations_fork_idx ON dataenv.fork_expirations (fork);
