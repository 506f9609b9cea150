-- Requests and the installation identity. The table is the source of truth; logical replication
-- of it is the sidecar's ordered wake-up.
CREATE TABLE dataenv.installation (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id         uuid NOT NULL DEFAULT gen_random_uuid(),
    kind       text NOT NULL DEFAULT 'control' CHECK (kind IN ('control', 'satellite')),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Kinds the sidecar knows, with the SQL function that validates a kind's args at insert time.
-- Each area's sqlapi file registers its kinds here.
CREATE TABLE dataenv.request_kinds (
    kind        text PRIMARY KEY,
    validator   regprocedure,
    description text NOT NULL
);

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
    -- the inserting top-level transaction: lets wait() detect "your own uncommitted request" and
    -- the sidecar check that a decoded row's transaction committed.
    xact             xid8 NOT NULL DEFAULT pg_current_xact_id(),
    attempts         integer NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (octet_length(args::text) <= 65536)
);

CREATE INDEX requests_unfinished_idx ON dataenv.requests (created_at)
    WHERE status IN ('pending', 'running');
CREATE INDEX requests_requested_by_idx ON dataenv.requests (requested_by, created_at);

-- Cancel updates are decoded with their old key only; REPLICA IDENTITY DEFAULT (the primary key)
-- is enough because the sidecar works from the new tuple.
ALTER TABLE dataenv.requests REPLICA IDENTITY DEFAULT;

-- What the leader sidecar last reported; one row per sidecar process.
CREATE TABLE dataenv.sidecars (
    instance_id     uuid PRIMARY KEY,
    hostname        text NOT NULL,
    pid             integer NOT NULL,
    version         text NOT NULL,
    is_leader       boolean NOT NULL DEFAULT false,
    started_at      timestamptz NOT NULL DEFAULT now(),
    heartbeat_at    timestamptz NOT NULL DEFAULT now(),
    confirmed_lsn   pg_lsn,
    ready           boolean NOT NULL DEFAULT false
);
