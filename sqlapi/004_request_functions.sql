-- ping, cancel and wait's argument checks are in sqlapi/shared/006 (a satellite has them alike);
-- wait is the control's own: it queues on the sidecar's gate lock, a satellite's polls
-- (sqlapi/satellite/052).

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
    PERFORM dataenv.wait_check(request_id, timeout);
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

GRANT EXECUTE ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval), dataenv.wait_check(uuid, interval)
    TO dataenv_user, dataenv_admin;
REVOKE EXECUTE ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval), dataenv.wait_check(uuid, interval) FROM PUBLIC;
