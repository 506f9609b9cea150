package dispatch

// SQL the dispatcher runs against dataenv.requests. Every state change is a compare-and-set on
// (status, attempts): a worker that lost its claim (a newer attempt exists) changes nothing.

// claimSQL moves a request to running and takes a new attempt number.
const claimSQL = `
UPDATE dataenv.requests
   SET status = 'running', attempts = attempts + 1,
       started_at = coalesce(started_at, clock_timestamp()), updated_at = clock_timestamp()
 WHERE id = $1 AND attempts = $2 AND status IN ('pending', 'running') AND NOT cancel_requested
RETURNING attempts`

// appendStepSQL appends one step to a running request's report.
const appendStepSQL = `
UPDATE dataenv.requests SET steps = steps || $3::jsonb, updated_at = clock_timestamp()
 WHERE id = $1 AND attempts = $2 AND status = 'running'`

// appendQueueStepSQL appends a step to a job that still waits in the queue (pending). It leaves
// updated_at alone: waiting is not progress.
const appendQueueStepSQL = `
UPDATE dataenv.requests SET steps = steps || $2::jsonb WHERE id = $1 AND status = 'pending'`

// outcomeSQL writes a batch of outcomes in one statement (one commit, one NOTIFY flush). Claimed
// requests must still be running with the same attempt; stateless ones (never claimed) must still
// be pending with the attempt they were read with, and take attempt+1 now. Steps the handler held
// for the outcome are appended in the same write.
const outcomeSQL = `
UPDATE dataenv.requests r
   SET status = o.status, result = o.result, error = o.error,
       steps = CASE WHEN o.steps IS NULL THEN r.steps ELSE r.steps || o.steps END,
       finished_at = clock_timestamp(), updated_at = clock_timestamp(),
       started_at = coalesce(r.started_at, o.started_at),
       attempts = CASE WHEN o.claimed THEN r.attempts ELSE r.attempts + 1 END
  FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::text[], $5::int[], $6::bool[], $7::timestamptz[], $8::jsonb[])
       AS o(id, status, result, error, attempts, claimed, started_at, steps)
 WHERE r.id = o.id AND r.attempts = o.attempts
   AND r.status = CASE WHEN o.claimed THEN 'running' ELSE 'pending' END
   AND (o.claimed OR NOT r.cancel_requested)
RETURNING r.id`

// rowStateSQL reads where a request stands, to tell "not visible yet" from "moved on".
const rowStateSQL = `SELECT status, attempts, cancel_requested FROM dataenv.requests WHERE id = $1`

// xactStatusSQL tells a transaction still in progress (its commit decoded, not yet visible: a
// synchronous standby has not answered) from one that is over.
const xactStatusSQL = `SELECT pg_catalog.pg_xact_status($1::xid8)`

// RequestColumns are the columns ScanRequest reads, in its order.
const RequestColumns = `id, kind, args, status, attempts, requested_by, cancel_requested, created_at`

// unfinishedSQL lists requests to resume after a start, a reconnect or a lost slot.
const unfinishedSQL = `
SELECT ` + RequestColumns + `
  FROM dataenv.requests
 WHERE status IN ('pending', 'running')
 ORDER BY created_at, id`

// gateLockSQL and gateUnlockSQL take and release the per-request gates that dataenv.wait() queues
// on (see sqlapi/004_request_functions.sql). The key is hashtext of the id's text, as wait() computes it.
const gateLockSQL = `SELECT x FROM unnest($1::uuid[]) AS x WHERE pg_try_advisory_lock(dataenv.lock_class('gate'), hashtext(x::text))`
const gateUnlockSQL = `SELECT count(pg_advisory_unlock(dataenv.lock_class('gate'), hashtext(x::text))) FROM unnest($1::uuid[]) AS x`
