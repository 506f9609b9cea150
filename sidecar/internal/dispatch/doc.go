// Package dispatch runs requests: it takes decoded transactions from the replication stream,
// unfinished rows re-read from the table (Rescan, at every connect) and rescued ones (Rescue, the
// leader's periodic sweep), runs each request's handler on a bounded pool of workers, and writes
// outcomes back in batches.
//
// # The state machine of one in-flight request
//
// An entry is admitted once per request id (later deliveries of the same id merge into it) and
// stays in flight until its state is the table's again: its outcome committed, or its row
// provably moved on. Nothing else removes it, except the end of the dispatcher itself (shutdown
// or lost leadership), after which the next leader's start-up re-read and its rescuer resume the
// row.
//
//	         Deliver / Rescan / Rescue
//	                   │
//	                   ▼
//	                queued ◄──────────────────── later (timer) ◄─────────────┐
//	                   │ a worker takes it                                   │
//	       stateless   │   claimed kinds                                     │
//	   ┌───────────────┤                                                     │
//	   │               ▼                                                     │
//	   │   claim: UPDATE … SET status = 'running', attempts = attempts + 1   │
//	   │          WHERE attempts = <held> AND status IN (pending, running)   │
//	   │          AND NOT cancel_requested                                   │
//	   │     1 row │            0 rows: read the row in a new snapshot       │
//	   │           │   ┌── not visible, its transaction in progress ─────────┤
//	   │           │   ├── pending/running at the held attempt (a race) ─────┤
//	   │           │   ├── error (connection lost) ──────────────────────────┤
//	   │           │   ├── running, cancel_requested ──► outcome: cancelled  │
//	   │           │   └── finished / another attempt / deleted ──► let go   │
//	   │           ▼                                                         │
//	   │       running: handler(ctx with fence.Attempt)                      │
//	   │           │  transient error, within the retry window:              │
//	   │           │  step "retrying", held attempt = this one ──────────────┘
//	   ▼           ▼
//	outcome (batched): UPDATE … WHERE attempts = <attempt> AND status = running
//	(stateless: status = pending AND NOT cancel_requested, attempts + 1)
//	   │ 1 row: written ──► forget            0 rows: read the row
//	   │                     moved on (finished, other attempt, cancelled, deleted) ──► forget
//	   └─────────────────────── not visible yet, or a race: write again later
//
// "let go" and "forget" acknowledge the entry's decoded transactions (the slot may be confirmed
// past them: the row's state is durable); a deferred entry keeps them unacknowledged however
// long it waits. A row is judged not visible (rather than deleted) while its inserting
// transaction is in progress (pg_xact_status of the decoded xact column): a commit is decoded
// before it is visible, most often for well under a millisecond, and for as long as a
// synchronous standby does not answer. A row that moved on to a newer attempt is someone else's:
// if that holder died, the rescuer finds the request running with an attempt no live worker
// holds, and hands it back.
//
// # Attempts and fencing
//
// Every claim takes a new attempt number; every state change afterwards is a compare-and-set on
// it, so a worker that lost its claim changes nothing. The handler's context carries a
// fence.Attempt: every connection it opens for a side effect is named after the attempt, and the
// first one to each cluster ends the sessions of earlier attempts (and of sidecars that no
// longer lead) before the handler checks state and acts (sidecar/internal/fence).
//
// # Transient and final errors
//
// A handler error that request.IsTransient accepts (a lost connection, a server restarting, a
// serialization failure, a lock timeout, a unique violation on a name an earlier attempt may
// still be creating) is retried with a capped backoff (200 ms doubling to 30 s) as a new
// attempt, shown as a "retrying" step, for up to Config.RetryWindow; every other error fails the
// request with its text, which must say what to do. A refusal (request.Refusef) is never retried.
//
// # Delivery and acknowledgement
//
// A decoded transaction is acknowledged once each of its requests is durable: claimed (running
// committed), finished, or provably moved on. The replication stream confirms the end of the
// longest acknowledged prefix, so a crash never confirms past a request whose state is not in
// the table.
//
// # Gates
//
// Requests in flight for more than 10 ms hold an advisory "gate" lock (at most Config.GateLimit
// at once) that dataenv.wait() queues on; see gate.go.
//
// # Tests
//
// Config.Signals (nil in production) reports each transition on a channel, so tests wait for
// the transition they provoke instead of sleeping.
package dispatch
