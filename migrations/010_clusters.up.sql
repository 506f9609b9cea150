-- Clusters dataenv administers, their secrets, and what dataenv created on them.
--
-- The secrets live in a table of their own that no role but the owner (the sidecar's role) can
-- read: no grant, no view, not in the publication. Everything else about a cluster is readable
-- through the dataenv.cluster_info view (sqlapi/010_clusters.sql).
CREATE TABLE dataenv.clusters (
    name                 text PRIMARY KEY,
    kind                 text NOT NULL DEFAULT 'external' CHECK (kind IN ('instance', 'external')),
    host                 text NOT NULL,
    port                 integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    -- NULL for the instance cluster: the sidecar reaches it with its own control DSN.
    admin_user           text,
    sslmode              text NOT NULL DEFAULT 'verify-full'
                         CHECK (sslmode IN ('disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full')),
    root_certificate_pem text,
    -- The managed roles setup converges on this cluster.
    app_role             text NOT NULL DEFAULT 'dataenv_app',
    replication_role     text NOT NULL DEFAULT 'dataenv_replication',
    -- host:port the last successful setup converged; creation is refused unless it equals the
    -- cluster's current host:port.
    set_up_for           text,
    set_up_at            timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (kind = 'instance' OR admin_user IS NOT NULL),
    CHECK (app_role <> replication_role)
);

CREATE TABLE dataenv.cluster_secrets (
    cluster                      text PRIMARY KEY
                                 REFERENCES dataenv.clusters (name) ON DELETE CASCADE ON UPDATE CASCADE,
    admin_password               text,
    -- Passwords of the managed roles. A new password is saved as *_pending before the role gets it
    -- and promoted afterwards, so a crash in between converges on the next setup.
    app_password                 text,
    app_password_pending         text,
    replication_password         text,
    replication_password_pending text,
    updated_at                   timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON dataenv.cluster_secrets FROM PUBLIC;

-- The authoritative ownership record of the databases dataenv created (a comment on the database
-- alone can be edited by its owner).
CREATE TABLE dataenv.managed_databases (
    cluster            text NOT NULL REFERENCES dataenv.clusters (name) ON UPDATE CASCADE,
    name               text NOT NULL,
    created_by_request uuid NOT NULL,
    -- The workspace a fork copy was created for (NULL for databases made by create_database).
    for_workspace      text,
    template           text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, name)
);

-- Per-cluster catalog of datatable roles: the same name may exist on two clusters.
CREATE TABLE dataenv.datatable_roles (
    cluster            text NOT NULL REFERENCES dataenv.clusters (name) ON UPDATE CASCADE,
    role               text NOT NULL,
    description        text,
    created_by_request uuid NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, role)
);
