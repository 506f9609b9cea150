-- Row-level security: a user sees and cancels only their own requests; dataenv_admin sees all.
-- The table owner (the sidecar's role) bypasses RLS.
ALTER TABLE dataenv.requests ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS requests_own ON dataenv.requests;
CREATE POLICY requests_own ON dataenv.requests
    USING (requested_by = current_user OR pg_has_role(current_user, 'dataenv_admin', 'MEMBER'))
    WITH CHECK (requested_by = current_user OR pg_has_role(current_user, 'dataenv_admin', 'MEMBER'));

REVOKE ALL ON dataenv.requests FROM PUBLIC;
GRANT SELECT, INSERT (kind, args) , UPDATE (cancel_requested) ON dataenv.requests TO dataenv_user, dataenv_admin;
GRANT INSERT (requested_by) ON dataenv.requests TO dataenv_admin;
GRANT SELECT ON dataenv.request_kinds TO dataenv_user, dataenv_admin;
