-- The request table's API: validation at insert, cancel, wait, ping, row-level security.

-- Kinds every installation has.
CREATE OR REPLACE FUNCTION dataenv.validate_ping(args jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    FOR k IN SELECT jsonb_object_keys(args) LOOP
        IF k NOT IN ('sleep_ms') THEN
            RAISE EXCEPTION 'ping: unknown argument "%"', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF args ? 'sleep_ms' AND (jsonb_typeof(args->'sleep_ms') <> 'number'
                              OR (args->>'sleep_ms')::numeric NOT BETWEEN 0 AND 600000) THEN
        RAISE EXCEPTION 'ping: sleep_ms must be a number of milliseconds between 0 and 600000'
            USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_ping(jsonb) IS 'Validates the args of a ping request.';

-- Validation runs on every request insert, so it must not plan anything per row: the kinds'
-- validators are compiled into one function, dataenv.validate_request(kind, args), a CASE over
-- the kinds with a static call each (plpgsql caches those plans), rebuilt whenever
-- request_kinds changes. A dynamic EXECUTE per insert cost more than the insert itself.
CREATE OR REPLACE FUNCTION dataenv.compile_request_kinds() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $compile$
DECLARE
    arms text;
BEGIN
    SELECT string_agg(format(E'\n        WHEN %L THEN %s', kind,
                             CASE WHEN validator IS NULL THEN 'NULL;'
                                  ELSE format('PERFORM %s(args);', validator::regproc) END),
                      '' ORDER BY kind)
      INTO arms FROM dataenv.request_kinds;
    EXECUTE format($def$
CREATE OR REPLACE FUNCTION dataenv.validate_request(kind text, args jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    CASE kind%s
    ELSE
        RAISE EXCEPTION 'dataenv request: unknown kind "%%"', kind
            USING ERRCODE = '22023',
                  HINT = 'SELECT kind, description FROM dataenv.request_kinds lists the kinds.';
    END CASE;
END
$body$$def$, coalesce(arms, E'\n        WHEN NULL THEN NULL;'));
    COMMENT ON FUNCTION dataenv.validate_request(text, jsonb) IS
        'Generated from dataenv.request_kinds (do not edit): refuses an unknown kind and runs the kind''s validator on args.';
    REVOKE EXECUTE ON FUNCTION dataenv.validate_request(text, jsonb) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION dataenv.validate_request(text, jsonb) TO dataenv_user, dataenv_admin;
    RETURN NULL;
END
$compile$;
COMMENT ON FUNCTION dataenv.compile_request_kinds() IS
    'Rebuilds dataenv.validate_request from dataenv.request_kinds.';

DROP TRIGGER IF EXISTS request_kinds_compile ON dataenv.request_kinds;
CREATE TRIGGER request_kinds_compile AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dataenv.request_kinds
    FOR EACH STATEMENT EXECUTE FUNCTION dataenv.compile_request_kinds();

INSERT INTO dataenv.request_kinds (kind, validator, description)
VALUES ('ping', 'dataenv.validate_ping(jsonb)'::regprocedure, 'Does nothing; health checks and benchmarks.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, description = EXCLUDED.description;
