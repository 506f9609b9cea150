-- plpgsql rather than sql: a SQL function that cannot be inlined plans its INSERT on every
-- call, and ping is what health checks and benchmarks call in a loop; plpgsql keeps the plan.
CREATE OR REPLACE FUNCTION dataenv.ping() RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    request_id uuid;
BEGIN
    INSERT INTO dataenv.requests (kind, args) VALUES ('ping', '{}'::jsonb) RETURNING id INTO request_id;
    RETURN request_id;
END
$$;
COMMENT ON FUNCTION dataenv.ping() IS
    'Makes a request that does nothing and returns its id; SELECT * FROM dataenv.wait(id) returns it finished.';

CREATE OR REPLACE FUNCTION dataenv.cancel(request_id uuid) RETURNS dataenv.requests
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r dataenv.requests;
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'dataenv.cancel: request_id is required' USING ERRCODE = '22004';
    END IF;
    UPDATE dataenv.requests SET cancel_requested = true
     WHERE id = request_id AND status IN ('pending', 'running') AND NOT cancel_requested;
    SELECT * INTO r FROM dataenv.requests WHERE id = request_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv.cancel: no request % visible to %', request_id, current_user
            USING ERRCODE = 'P0002';
    END IF;
    RETURN r;
END
$$;
COMMENT ON FUNCTION dataenv.cancel(uuid) IS
    'Cancels a request: a pending one is cancelled at once, a running one is stopped by the sidecar. Returns the row; finished requests are left as they are.';

-- wait() cannot use LISTEN: notifications reach a session only between transactions, never inside
-- a function. Instead the sidecar holds an advisory "gate" lock per request from the moment it
-- decodes the request until the outcome is committed; wait() queues on that lock and re-reads the
-- row when it is released. Only in the short window before the sidecar has seen the request (or
-- while no sidecar runs) does wait() re-check with a capped backoff.
CREATE OR REPLACE FUNCTION dataenv.wait(request_id uuid, timeout interval DEFAULT '30 s')
RETURNS dataenv.requests
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r dataenv.requests;
    deadline timestamptz := clock_timestamp() + timeout;
    remaining_ms bigint;
    gate_class integer := dataenv.lock_class('gate');
    gate_key integer := hashtext(request_id::text);
    old_lock_timeout text := current_setting('lock_timeout');
    backoff double precision := 0.001;
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'dataenv.wait: request_id is required' USING ERRCODE = '22004';
    END IF;
    IF timeout IS NULL OR timeout < interval '0' THEN
        RAISE EXCEPTION 'dataenv.wait: timeout must be a non-negative interval' USING ERRCODE = '22023';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'dataenv.wait needs READ COMMITTED: under % the outcome can never become visible',
            current_setting('transaction_isolation') USING ERRCODE = '25000';
    END IF;
    LOOP
        SELECT * INTO r FROM dataenv.requests WHERE id = request_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dataenv.wait: no request % visible to %', request_id, current_user
                USING ERRCODE = 'P0002',
                      HINT = 'A request made in another, uncommitted transaction is not visible yet.';
        END IF;
        IF r.status IN ('succeeded', 'failed', 'cancelled') THEN
            RETURN r;
        END IF;
        IF r.xact = pg_current_xact_id_if_assigned() THEN
            RAISE EXCEPTION 'dataenv.wait: request % was made in this transaction, which has not committed', request_id
                USING ERRCODE = '25000',
                      HINT = 'COMMIT first: the sidecar only sees committed requests, so waiting here would never end.';
        END IF;
        IF clock_timestamp() >= deadline THEN
            RETURN r;
        END IF;
        remaining_ms := ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000);
        IF pg_try_advisory_lock_shared(gate_class, gate_key) THEN
            -- Nobody holds the gate: the sidecar has not seen the request yet.
            PERFORM pg_advisory_unlock_shared(gate_class, gate_key);
            PERFORM pg_sleep(least(backoff, remaining_ms / 1000.0));
            backoff := least(backoff * 2, 0.05);
        ELSE
            PERFORM set_config('lock_timeout', remaining_ms::text, true);
            BEGIN
                PERFORM pg_advisory_lock_shared(gate_class, gate_key);
                PERFORM pg_advisory_unlock_shared(gate_class, gate_key);
            EXCEPTION WHEN lock_not_available THEN
                NULL;
            END;
            PERFORM set_config('lock_timeout', old_lock_timeout, true);
            backoff := 0.001;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.wait(uuid, interval) IS
    'Returns the request once it is finished, or as it stands when the timeout passes. Raises if the request was made in the still-open calling transaction.';

GRANT EXECUTE ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval)
    TO dataenv_user, dataenv_admin;
REVOKE EXECUTE ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval) FROM PUBLIC;
