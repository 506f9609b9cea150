-- Spares with a role of their own (issue 14): a spare's objects are owned by a NOLOGIN role made
-- with it (names.SpareRole), so that a fork whose workspace has no role on the cluster yet takes
-- the role with the database, renamed into the workspace's role, instead of re-owning every
-- object while the user waits. NULL: a template, or a spare made before spares had roles (its
-- objects belong to the template's owner, and a fork re-owns them as before).
ALTER TABLE dataenv.schema_templates ADD COLUMN role name;
COMMENT ON COLUMN dataenv.schema_templates.role IS
    'A spare''s own role, owner of its database and objects (NULL: a template, or a spare made before spare roles). Dropped with the spare, or renamed into a fork''s workspace role when a fork takes the spare.';
