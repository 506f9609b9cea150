-- ---------------------------------------------------------------------------------------------
-- Lifecycle: compare a fork with its parent
-- ---------------------------------------------------------------------------------------------

-- What a fork changed is read by the sidecar: the schema of each datatable copy against its
-- parent's database (catalogs read as the cluster's admin, with no code of the databases' owners
-- run), and the fork's lake tables against the parent's records. A request runs only once its
-- transaction has committed, so one function cannot both make the request and show its outcome:
-- compare_fork returns the request id, and fork_differences(id) waits for it and shows the
-- outcome as rows.
CREATE OR REPLACE FUNCTION dataenv.validate_compare_fork(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fork text := args->>'fork';
BEGIN
    PERFORM dataenv.check_request_keys('compare_fork', args, ARRAY['fork']);
    PERFORM dataenv.check_workspace_id('compare_fork', fork);
    PERFORM dataenv.require_workspace_user('compare_fork', fork);
    PERFORM dataenv.require_fork('compare_fork', fork, 'there is no parent to compare it with');
END
$$;
COMMENT ON FUNCTION dataenv.validate_compare_fork(jsonb) IS 'Validates the args of a compare_fork request.';

CREATE OR REPLACE FUNCTION dataenv.compare_fork(fork text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('compare_fork', jsonb_build_object('fork', fork)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.compare_fork(text) IS
    'Requests (members of the fork who may also use its parent) a comparison of a fork with its parent: per schema_only or full_copy datatable the tables, columns, indexes, constraints, functions, views and triggers added, removed or changed in the fork''s copy (keep_original ones share the parent''s database); per lake the tables the fork materialized, beside the parent''s state of each. Changes nothing. Returns the request id: SELECT * FROM dataenv.fork_differences(id) shows the outcome as rows.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('compare_fork', 'dataenv.validate_compare_fork(jsonb)'::regprocedure, 'workspace_member', 'fork',
        'Compares a fork with its parent: schema differences per datatable copy, fork-materialized tables per lake; changes nothing.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

-- SECURITY INVOKER: the caller reads the request through row-level security (its own requests,
-- or every request for an administrator), so nobody reads another's comparison.
CREATE OR REPLACE FUNCTION dataenv.fork_differences(request_id uuid, timeout interval DEFAULT '30 s')
RETURNS TABLE (area text, name text, object_kind text, object text, change text, detail text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.fork_differences';
    r dataenv.requests;
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION '%: request_id is required', fn USING ERRCODE = '22004',
            HINT = 'SELECT dataenv.compare_fork(fork) returns one.';
    END IF;
    r := dataenv.wait(request_id, timeout);
    IF r.kind <> 'compare_fork' THEN
        RAISE EXCEPTION '%: request % is a % request, not a compare_fork one', fn, request_id, r.kind
            USING ERRCODE = '22023', HINT = 'Pass the id dataenv.compare_fork(fork) returned.';
    END IF;
    IF r.status = 'failed' OR r.status = 'cancelled' THEN
        RAISE EXCEPTION '%: compare_fork request % %: %', fn, request_id, r.status, coalesce(r.error, 'no error recorded')
            USING ERRCODE = '55000', HINT = 'Fix what the error says, then compare again: SELECT dataenv.compare_fork(fork).';
    END IF;
    IF r.status <> 'succeeded' THEN
        RAISE EXCEPTION '%: compare_fork request % is still %', fn, request_id, r.status
            USING ERRCODE = '55000', HINT = 'Ask again later, or with a longer timeout: dataenv.fork_differences(id, timeout => ''5 min'').';
    END IF;
    -- A row per difference, and a row for a datatable or lake whose entry has a note (nothing
    -- to compare, no differences, or more differences than the result holds).
    RETURN QUERY
    SELECT x.area, x.name, x.object_kind, x.object, x.change, x.detail FROM (
        SELECT 1 AS a, dt.i, ds.j, 'datatable'::text AS area, dt.d->>'datatable' AS name, ds.e->>'kind' AS object_kind,
               ds.e->>'object' AS object, ds.e->>'change' AS change, ds.e->>'detail' AS detail
          FROM jsonb_array_elements(coalesce(nullif(r.result->'datatables', 'null'::jsonb), '[]'::jsonb)) WITH ORDINALITY AS dt(d, i)
         CROSS JOIN LATERAL jsonb_array_elements(coalesce(nullif(dt.d->'differences', 'null'::jsonb), '[]'::jsonb)) WITH ORDINALITY AS ds(e, j)
        UNION ALL
        SELECT 1, dt.i, 0, 'datatable', dt.d->>'datatable', NULL, NULL, dt.d->>'status', dt.d->>'note'
          FROM jsonb_array_elements(coalesce(nullif(r.result->'datatables', 'null'::jsonb), '[]'::jsonb)) WITH ORDINALITY AS dt(d, i)
         WHERE dt.d ? 'note'
        UNION ALL
        SELECT 2, lk.i, tb.j, 'lake', lk.l->>'lake', 'table', tb.t->>'table', tb.t->>'state', tb.t->>'detail'
          FROM jsonb_array_elements(coalesce(nullif(r.result->'lakes', 'null'::jsonb), '[]'::jsonb)) WITH ORDINALITY AS lk(l, i)
         CROSS JOIN LATERAL jsonb_array_elements(coalesce(nullif(lk.l->'tables', 'null'::jsonb), '[]'::jsonb)) WITH ORDINALITY AS tb(t, j)
        UNION ALL
        SELECT 2, lk.i, 0, 'lake', lk.l->>'lake', NULL, NULL, lk.l->>'status', lk.l->>'note'
          FROM jsonb_array_elements(coalesce(nullif(r.result->'lakes', 'null'::jsonb), '[]'::jsonb)) WITH ORDINALITY AS lk(l, i)
         WHERE lk.l ? 'note'
    ) x
    ORDER BY x.a, x.i, x.j;
END
$$;
COMMENT ON FUNCTION dataenv.fork_differences(uuid, interval) IS
    'Waits (up to timeout) for a compare_fork request of the caller''s and shows its outcome, a row per difference: area datatable or lake, its name, object_kind (table, column, constraint, index, trigger, view, function; table for a lake), object, change (added, removed, changed; fork-materialized for a lake table) and detail (what changed; for a lake table its row count and the parent''s state). A datatable or lake without differences has one row saying so (change shared, own, unchanged, no_parent; for a lake shared or isolated). The full outcome is the request''s result.';

REVOKE ALL ON FUNCTION dataenv.validate_compare_fork(jsonb), dataenv.compare_fork(text), dataenv.fork_differences(uuid, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.validate_compare_fork(jsonb), dataenv.compare_fork(text), dataenv.fork_differences(uuid, interval)
  TO dataenv_user, dataenv_admin;
