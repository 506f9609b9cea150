package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/replication"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Observer is told about finished requests (metrics).
type Observer interface {
	RequestFinished(kind, outcome string, queueWait, run time.Duration)
}

// Config of a Dispatcher. Zero values take the documented defaults.
type Config struct {
	Pool        *pgxpool.Pool     // control database, the sidecar's role (bypasses RLS)
	DSN         string            // control database, for the gate connection
	GateAppName string            // application_name of the gate connection, default "dataenv"
	Instance    uuid.UUID         // this sidecar process (names the sessions of each attempt)
	Registry    *request.Registry // handlers per kind
	Concurrency int               // parallel handlers of control-plane kinds, default 8
	// JobKinds are the kinds that run on the job workers (run, materialize): JobConcurrency of
	// them, at most JobsPerUser per requesting user and JobsPerWorkspace per workspace (args'
	// workspace) at once. Empty: every kind is control-plane.
	JobKinds []string
	// SchedulingKind is the kind a request is classed as, when it is not its own (a satellite
	// envelope is classed by the kind it carries); nil: its own.
	SchedulingKind func(request.Request) string
	// SchedulingOwner is the user and workspace a job counts against, when they are not its
	// requester and args.workspace (a satellite envelope carries its row's); nil: those.
	SchedulingOwner func(request.Request) (user, workspace string)
	// Remote says which requests wait for a resource outside the control database (a satellite
	// envelope waits for one of the bounded connections to satellites): those that are not jobs
	// run on RemoteConcurrency workers of their own (default Concurrency), so that a queue of
	// them never holds the control-plane workers. nil: none.
	Remote            func(request.Request) bool
	RemoteConcurrency int
	JobConcurrency    int           // default 4
	JobsPerUser       int           // default JobConcurrency - 1 (at least 1): a slot stays for others
	JobsPerWorkspace  int           // default JobConcurrency - 1 (at least 1)
	QueueReportEvery  time.Duration // least time between two rounds of queue steps, default 1s
	// RetryWindow is how long a request whose handler keeps hitting transient faults is retried
	// (each retry a new attempt, capped backoff) before it fails; default 30 minutes.
	RetryWindow time.Duration
	GateLimit   int // request gates held at once, default 4096
	MaxBatch    int // outcomes per write, default 512
	Logger      *slog.Logger
	Observer    Observer         // may be nil
	Signals     *Signals         // test hooks, nil in production
	Now         func() time.Time // clock, default time.Now
}

// entry is one in-flight request.
type entry struct {
	req      request.Request
	xact     string // the inserting transaction (xid8) from the decoded tuple; "" when read from the table
	fromScan bool
	enqueued time.Time
	cancel   context.CancelCauseFunc // set while its handler runs
	userStop atomic.Bool             // dataenv.cancel() was called
	durable  bool                    // claimed (running committed) or finished
	acks     []*txAck                // transactions waiting for this entry to be durable

	class int      // classControl, classJob or classRemote
	owner jobOwner // a job's user and workspace
	// queueNote is the last queue step written (touched by the queue reporter only).
	queueNote string

	// Touched only by the worker holding the entry, or by its deferral timer afterwards.
	claimTries   int       // claims in a row that matched no row
	failures     int       // transient handler failures in a row
	failingSince time.Time // first of those failures
}

// txAck counts the requests of one decoded transaction that are not durable yet.
type txAck struct {
	remaining int
	ack       func()
}

// Dispatcher is the request state machine (see doc.go). Deliver, Rescan and Rescue feed it;
// Start runs it.
type Dispatcher struct {
	cfg    Config
	gate   *gate
	writer *writer

	mu       sync.Mutex
	inflight map[uuid.UUID]*entry
	queue    []*entry
	running  int
	deferred int
	wakes    [numClasses]chan struct{}
	stopping bool
	// running jobs in total, per user and per workspace (the caps of Config.JobsPer*)
	jobsRunning     int
	jobsByUser      map[string]int
	jobsByWorkspace map[string]int
	queueSig        chan struct{}
	wg              sync.WaitGroup

	unwritten atomic.Int64 // outcomes handed to the writer and not yet written or dropped
}

// New returns a dispatcher; call Start to run it.
func New(cfg Config) *Dispatcher {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.RetryWindow <= 0 {
		cfg.RetryWindow = 30 * time.Minute
	}
	if cfg.GateLimit <= 0 {
		cfg.GateLimit = 4096
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.GateAppName == "" {
		cfg.GateAppName = "dataenv"
	}
	if cfg.JobConcurrency <= 0 {
		cfg.JobConcurrency = 4
	}
	if cfg.RemoteConcurrency <= 0 {
		cfg.RemoteConcurrency = cfg.Concurrency
	}
	if cfg.JobsPerUser <= 0 {
		cfg.JobsPerUser = max(cfg.JobConcurrency-1, 1)
	}
	if cfg.JobsPerWorkspace <= 0 {
		cfg.JobsPerWorkspace = max(cfg.JobConcurrency-1, 1)
	}
	if cfg.QueueReportEvery <= 0 {
		cfg.QueueReportEvery = time.Second
	}
	d := &Dispatcher{cfg: cfg, inflight: map[uuid.UUID]*entry{}, jobsByUser: map[string]int{},
		jobsByWorkspace: map[string]int{}, queueSig: make(chan struct{}, 1)}
	for c := range d.wakes {
		d.wakes[c] = make(chan struct{}, 1)
	}
	d.gate = newGate(cfg.DSN, cfg.GateAppName, cfg.GateLimit, cfg.Logger)
	d.writer = &writer{pool: cfg.Pool, log: cfg.Logger, in: make(chan *outcome, 4*cfg.MaxBatch),
		maxBatch: cfg.MaxBatch, done: d.outcomeDone, signals: cfg.Signals}
	return d
}

// Start runs the gate, the outcome writer and the workers until ctx ends. Stop drains them.
func (d *Dispatcher) Start(ctx context.Context, workCtx context.Context) {
	go d.gate.run(ctx)
	go d.writer.run(ctx)
	for range d.cfg.Concurrency {
		d.wg.Add(1)
		go d.worker(workCtx, classControl)
	}
	if len(d.cfg.JobKinds) > 0 {
		for range d.cfg.JobConcurrency {
			d.wg.Add(1)
			go d.worker(workCtx, classJob)
		}
		go d.reportQueue(workCtx)
	}
	if d.cfg.Remote != nil {
		for range d.cfg.RemoteConcurrency {
			d.wg.Add(1)
			go d.worker(workCtx, classRemote)
		}
	}
}

// Deliver implements replication.Sink: request inserts are queued, cancellations reach running
// handlers. ack runs once every request of tx is durable.
func (d *Dispatcher) Deliver(_ context.Context, tx *replication.Tx, ack func()) error {
	crashpoint.HitOnce("dispatch.on_deliver")
	ta := &txAck{ack: ack}
	d.mu.Lock()
	for _, ch := range tx.Changes {
		if ch.Table == "request_cancellations" {
			if id, err := uuid.Parse(valueOf(ch, "request_id")); err == nil {
				d.cancelLocked(id)
			}
			continue
		}
		if ch.Table != "requests" {
			continue
		}
		req, err := requestFromChange(ch)
		if err != nil {
			d.cfg.Logger.Error("skipping undecodable request change", "error", err)
			continue
		}
		if ch.Op == replication.Insert && req.Status == request.Pending {
			if e := d.admitLocked(req, valueOf(ch, "xact"), false); !e.durable {
				e.acks = append(e.acks, ta)
				ta.remaining++
			}
		}
	}
	d.mu.Unlock()
	if ta.remaining == 0 {
		ack()
	}
	d.poke()
	return nil
}

// Rescan queues every unfinished request found in the table (start, reconnect, new slot).
func (d *Dispatcher) Rescan(ctx context.Context) (int, error) {
	reqs, err := readUnfinished(ctx, d.cfg.Pool)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reqs {
		if d.Rescue(r) {
			n++
		}
	}
	return n, nil
}

// Rescue queues req, read from the table, unless it is in flight already; it reports whether it
// did. The rescuer (sidecar/internal/rescuer) calls it for requests that no worker holds.
func (d *Dispatcher) Rescue(req request.Request) bool {
	d.mu.Lock()
	_, held := d.inflight[req.ID]
	admit := !held && !d.stopping
	if admit {
		d.admitLocked(req, "", true)
	}
	d.mu.Unlock()
	if admit {
		d.poke()
	}
	return admit
}

// InFlight reports whether the request is held by this dispatcher (queued, deferred, running or
// waiting for its outcome write).
func (d *Dispatcher) InFlight(id uuid.UUID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.inflight[id]
	return ok
}

// admitLocked returns the in-flight entry of req, creating and queueing it when new.
func (d *Dispatcher) admitLocked(req request.Request, xact string, fromScan bool) *entry {
	if e, ok := d.inflight[req.ID]; ok {
		if e.xact == "" {
			e.xact = xact
		}
		return e
	}
	e := &entry{req: req, xact: xact, fromScan: fromScan, enqueued: d.cfg.Now(), class: d.classOf(req)}
	if e.class == classJob {
		e.owner = d.ownerOf(req)
		d.queueChanged()
	}
	if req.CancelRequested {
		e.userStop.Store(true)
	}
	d.inflight[req.ID] = e
	d.queue = append(d.queue, e)
	d.gate.Lock(req.ID)
	return e
}

func (d *Dispatcher) cancelLocked(id uuid.UUID) {
	e, ok := d.inflight[id]
	if !ok {
		return
	}
	e.userStop.Store(true)
	if e.cancel != nil {
		e.cancel(errCancelledByUser)
	}
}

// markDurable records that e's state survives a crash and releases the transactions waiting on it.
func (d *Dispatcher) markDurable(e *entry) {
	d.mu.Lock()
	var ready []func()
	if !e.durable {
		e.durable = true
		for _, ta := range e.acks {
			if ta.remaining--; ta.remaining == 0 {
				ready = append(ready, ta.ack)
			}
		}
		e.acks = nil
	}
	d.mu.Unlock()
	for _, ack := range ready {
		ack()
	}
}

// forget drops e once its outcome is written, or once its row provably moved on (finished, a
// newer attempt, deleted): its state is then the table's, so its transactions are acknowledged.
func (d *Dispatcher) forget(e *entry) {
	d.markDurable(e)
	d.mu.Lock()
	if d.inflight[e.req.ID] == e {
		delete(d.inflight, e.req.ID)
	}
	d.mu.Unlock()
	d.gate.Unlock(e.req.ID)
}

// drop forgets e without acknowledging anything, only when the dispatcher itself is going away
// (shutdown, lost leadership): its row is unfinished, and the next leader's start-up re-read and
// its rescuer resume it.
func (d *Dispatcher) drop(e *entry) {
	d.mu.Lock()
	if d.inflight[e.req.ID] == e {
		delete(d.inflight, e.req.ID)
	}
	d.mu.Unlock()
	d.gate.Unlock(e.req.ID)
}

// later queues e again after delay (a claim to try again, a retry's backoff). The worker is free
// meanwhile; the entry stays in flight, so nothing else admits it twice.
func (d *Dispatcher) later(e *entry, delay time.Duration) {
	d.mu.Lock()
	d.deferred++
	d.mu.Unlock()
	time.AfterFunc(delay, func() {
		d.mu.Lock()
		d.deferred--
		if d.stopping || d.inflight[e.req.ID] != e {
			d.mu.Unlock()
			return
		}
		d.queue = append(d.queue, e)
		d.mu.Unlock()
		d.poke()
	})
}

// poke wakes an idle worker of every class.
func (d *Dispatcher) poke() {
	for c := range d.wakes {
		d.pokeClass(c)
	}
}

// Counts returns the queued (including deferred) and running request counts.
func (d *Dispatcher) Counts() (queued, running int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue) + d.deferred, d.running
}

func valueOf(ch replication.Change, col string) string {
	v, _ := ch.Value(col)
	return v
}
