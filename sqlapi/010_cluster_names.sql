-- Clusters: registration (secrets kept out of every view and request), setup, databases and
-- datatable roles on them, the lifecycle lock, and the uses that keep a database from being dropped.
--
-- Lock: every function here that saves a cluster's configuration takes the cluster's lifecycle
-- lock as a transaction advisory lock with the key
--     (dataenv.lock_class('lifecycle'), hashtext(<cluster name>))
-- The sidecar takes the same key as a session lock (sidecar/lock) around every side effect that
-- changes which databases or roles exist, and reads the configuration under it.


-- ---------------------------------------------------------------------------------------------
-- Names
-- ---------------------------------------------------------------------------------------------

-- The rule for every name a user chooses (clusters, databases, datatable roles), mirrored by
-- cluster.ValidateName in Go: 1 to 63 bytes of lowercase ASCII letters, digits and underscores,
-- starting with a letter. Quotes, semicolons, whitespace, upper case and non-ASCII characters are
-- refused rather than quoted or normalized: a name then means the same thing in psql without
-- quoting, byte length equals character length, and no two names differ only by Unicode
-- normalization or case. Prefixes pg_ (PostgreSQL's) and dataenv_ (dataenv's own databases and
-- roles) are reserved, as are the databases postgres/template0/template1 and the role names
-- PostgreSQL reserves.
CREATE OR REPLACE FUNCTION dataenv.check_name(what text, value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF what IS NULL OR what NOT IN ('cluster', 'database', 'role') THEN
        RAISE EXCEPTION 'dataenv.check_name: what must be cluster, database or role' USING ERRCODE = '22023';
    END IF;
    IF value IS NULL OR value = '' THEN
        RAISE EXCEPTION 'dataenv: % name is required (got %)', what, coalesce(to_json(value)::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(value) > 63 THEN
        RAISE EXCEPTION 'dataenv: % name % is % bytes; the limit is 63 (PostgreSQL would truncate it)',
            what, to_json(left(value, 80))::text, octet_length(value) USING ERRCODE = '22023';
    END IF;
    IF value !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'dataenv: % name % is not allowed', what, to_json(value)::text
            USING ERRCODE = '22023',
                  DETAIL = 'Names are lowercase ASCII letters, digits and underscores, starting with a letter: no quotes, semicolons, whitespace, upper case or non-ASCII characters.';
    END IF;
    IF value LIKE 'pg\_%' OR value LIKE 'dataenv\_%' THEN
        RAISE EXCEPTION 'dataenv: % name % uses a reserved prefix (pg_ or dataenv_)', what, to_json(value)::text
            USING ERRCODE = '22023';
    END IF;
    IF what = 'database' AND value IN ('postgres', 'template0', 'template1') THEN
        RAISE EXCEPTION 'dataenv: database name % is reserved', to_json(value)::text USING ERRCODE = '22023';
    END IF;
    IF what = 'role' AND value IN ('public', 'none', 'current_user', 'current_role', 'session_user', 'user') THEN
        RAISE EXCEPTION 'dataenv: role name % is reserved', to_json(value)::text USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_name(text, text) IS
    'Raises unless value is an acceptable user-chosen name of a cluster, database or role: 1-63 bytes of [a-z0-9_] starting with a letter, no pg_/dataenv_ prefix, not reserved.';

-- Managed role names (setup's application and replication users) must carry the dataenv_ prefix,
-- so that they can never collide with a user-chosen name.
CREATE OR REPLACE FUNCTION dataenv.check_managed_role_name(value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR value !~ '^dataenv_[a-z0-9_]+$' OR octet_length(value) > 63 THEN
        RAISE EXCEPTION 'dataenv: managed role name % is not allowed', coalesce(to_json(value)::text, 'NULL')
            USING ERRCODE = '22023',
                  DETAIL = 'Managed role names are dataenv_ followed by lowercase ASCII letters, digits and underscores, at most 63 bytes.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_managed_role_name(text) IS
    'Raises unless value is an acceptable name for a managed role (dataenv_[a-z0-9_]+, at most 63 bytes).';
