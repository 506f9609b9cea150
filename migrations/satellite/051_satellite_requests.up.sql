-- A satellite installation's own tables (docs/satellites.md): its identity, its requests and how
-- it reaches the control installation. Applied with `dataenv install --control-database`, never
-- in a control database.
-- dblink carries envelopes to the control database; it lives in dataenv, executable by the
-- installer only (sqlapi/satellite/052_satellite_requests.sql revokes it from PUBLIC).
CREATE EXTENSION dblink WITH SCHEMA dataenv;

CREATE TABLE dataenv.installation (
    singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id               uuid NOT NULL DEFAULT gen_random_uuid(),
    kind             text NOT NULL DEFAULT 'satellite' CHECK (kind = 'satellite'),
    created_at       timestamptz NOT NULL DEFAULT now(),
    protocol         integer NOT NULL CHECK (protocol > 0),
    control_database name NOT NULL,
    -- Roles are cluster-wide: these two are this satellite's own, so that being a dataenv user
    -- (or administrator) elsewhere grants nothing here.
    user_role        name NOT NULL,
    admin_role       name NOT NULL
);

-- The login role and password the commit-time trigger uses to file envelopes. Only the
-- installer (the table's owner) reads it.
CREATE TABLE dataenv.control_credentials (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    login_role name NOT NULL,
    password   text NOT NULL
);
REVOKE ALL ON dataenv.control_credentials FROM PUBLIC;

CREATE TABLE dataenv.request_kinds (
    kind        text PRIMARY KEY,
    validator   regprocedure,
    policy      text NOT NULL DEFAULT 'admin' CHECK (policy IN ('any', 'admin')),
    description text NOT NULL
);

-- The same shape as the control installation's dataenv.requests, so wait, cancel and the views
-- read alike; the sidecar writes outcomes here after it ran the envelope.
CREATE TABLE dataenv.requests (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind             text NOT NULL REFERENCES dataenv.request_kinds (kind),
    args             jsonb NOT NULL DEFAULT '{}'::jsonb,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    result           jsonb,
    error            text,
    steps            jsonb NOT NULL DEFAULT '[]'::jsonb,
    requested_by     name NOT NULL DEFAULT current_user,
    xact             xid8 NOT NULL DEFAULT pg_current_xact_id(),
    attempts         integer NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (octet_length(args::text) <= 65536)
);
CREATE INDEX requests_requested_by_idx ON dataenv.requests (requested_by, created_at);
