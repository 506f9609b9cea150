-- Satellite installations registered with this control installation. A satellite lives in another
-- database of the same cluster; its identity is the pair (database OID, installation UUID), so a
-- dropped and re-created satellite, or a database renamed and replaced, is a different one.
-- Each satellite reaches the control database as its own login role, whose only right is the
-- envelope function (sqlapi/050_satellite_envelopes.sql): the origin of an envelope is derived
-- from that role, never taken from the caller.
CREATE TABLE dataenv.satellites (
    installation_id uuid PRIMARY KEY,
    database_oid    oid NOT NULL,
    database_name   name NOT NULL,  -- as it was at install; the sidecar resolves the OID each time
    login_role      name NOT NULL UNIQUE,
    protocol        integer NOT NULL CHECK (protocol > 0),
    registered_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX satellites_database_oid_idx ON dataenv.satellites (database_oid);

-- policy 'satellite': only a registered satellite's login role may file the kind (the envelope).
ALTER TABLE dataenv.request_kinds DROP CONSTRAINT request_kinds_policy_check;
ALTER TABLE dataenv.request_kinds ADD CONSTRAINT request_kinds_policy_check
    CHECK (policy IN ('any', 'admin', 'workspace_member', 'workspace_owner', 'satellite'));

-- What the leader reports about its connections to satellites.
ALTER TABLE dataenv.sidecars
    ADD COLUMN satellite_connections_open integer NOT NULL DEFAULT 0,
    ADD COLUMN satellite_connections_in_use integer NOT NULL DEFAULT 0;
