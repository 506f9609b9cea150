-- The OID of a fork's metadata schema, recorded once dataenv created it (or first found it with
-- its marker): a drop refuses a schema of that name with another OID, which someone made in its
-- place. NULL on rows registered before this migration: their first attach records it.
ALTER TABLE dataenv.fork_lake_namespaces ADD COLUMN schema_oid oid;
