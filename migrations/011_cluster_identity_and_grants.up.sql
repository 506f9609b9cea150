-- Identity of what dataenv creates on clusters, and grants of databases to users.
--
-- Names and comments can be forged (a database owner with CREATEDB can rename a managed database
-- and create a stand-in with the old name and a copied marker); OIDs cannot be chosen. Each record
-- keeps the OID and owner of the object at its creation, and every drop checks them together with
-- the marker and the record. Rows recorded before these columns existed have NULL here and are
-- filled at their next touch (the check then relies on the marker and the owner).
ALTER TABLE dataenv.managed_databases
    ADD COLUMN database_oid oid,
    ADD COLUMN owner_oid    oid;

ALTER TABLE dataenv.datatable_roles
    ADD COLUMN role_oid oid;

-- The two managed roles setup converges (NULL until setup records them; reset when
-- update_cluster renames them).
ALTER TABLE dataenv.clusters
    ADD COLUMN app_role_oid         oid,
    ADD COLUMN replication_role_oid oid;

-- Binding a database to a workspace (add_datatable) is a dataenv administrator's act, or needs a
-- grant of that database to the binding role (or to a role it is a member of).
CREATE TABLE dataenv.database_grants (
    cluster    text NOT NULL REFERENCES dataenv.clusters (name) ON DELETE CASCADE ON UPDATE CASCADE,
    database   text NOT NULL CHECK (octet_length(database) BETWEEN 1 AND 63),
    grantee    name NOT NULL,
    granted_by name NOT NULL DEFAULT current_user,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, database, grantee)
);
