-- Schema templates (issue 14): per datatable entry, a marked database holding the parent's schema
-- without rows, from which schema_only forks are TEMPLATE copies while the parent's schema is
-- unchanged. A row is the template's ledger, like dataenv.fork_copies: written before the
-- database exists, deleted only after it was dropped; deliberately no foreign key to the
-- datatable entry, whose removal enqueues the template's cleanup (sqlapi/028_schema_templates.sql).
CREATE TABLE dataenv.schema_templates (
    cluster            text NOT NULL REFERENCES dataenv.clusters (name) ON UPDATE CASCADE,
    database           text NOT NULL CHECK (database LIKE 'dataenv\_tpl\_%'),
    -- the datatable entry (workspace, datatable) whose database the template copies
    workspace          text NOT NULL,
    datatable          text NOT NULL,
    parent_database    text NOT NULL,
    -- the role owning the template's objects
    owner              name NOT NULL,
    -- digest of the parent's schema when the build started (sidecar/internal/workspace/fingerprint.go)
    fingerprint        text,
    -- building: the database may be missing, partial or complete; ready: usable
    state              text NOT NULL DEFAULT 'building' CHECK (state IN ('building', 'ready')),
    -- what the build could not carry (objects only a superuser may create), for the forks' results
    report             jsonb NOT NULL DEFAULT '[]',
    created_by_request uuid NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    ready_at           timestamptz,
    PRIMARY KEY (cluster, database)
);
CREATE INDEX schema_templates_entry_idx ON dataenv.schema_templates (workspace, datatable);
CREATE INDEX schema_templates_parent_idx ON dataenv.schema_templates (cluster, parent_database);

-- A schema_only copy may now be a TEMPLATE copy of a schema template.
ALTER TABLE dataenv.fork_copies DROP CONSTRAINT fork_copies_method_check;
ALTER TABLE dataenv.fork_copies ADD CONSTRAINT fork_copies_method_check
    CHECK (method IN ('template', 'clone', 'dump', 'schema_template'));
-- What the copy's request reported about fidelity (owner, mapped roles, what was not carried).
ALTER TABLE dataenv.fork_copies ADD COLUMN report jsonb;
