package cluster_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	sqlcontrol "github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/tests/testenv"
)

// Two harness clusters: control holds the control databases (and is the "instance" cluster),
// external is administered by a non-superuser CREATEDB CREATEROLE admin.
var control, external *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if control, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		external, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "external"})
		return err
	})
}

// fixture is one installed control database with an external cluster registered in it.
type fixture struct {
	t          *testing.T
	ctx        context.Context
	controlDB  string
	controlDSN string
	sql        *pgx.Conn // superuser on the control database
	pool       *pgxpool.Pool
	admin      *cluster.Admin
	reg        *request.Registry
	logs       *testenv.LogBuffer
	promReg    *prometheus.Registry

	prefix    string // names on the external cluster
	name      string // the external cluster's name in dataenv.clusters
	adminUser string
	adminPW   string
	appRole   string
	replRole  string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, ctx: ctx, logs: &testenv.LogBuffer{}}
	f.controlDB = control.CreateDatabase(t)
	f.controlDSN = control.DSN(f.controlDB)
	f.sql = control.Connect(t, f.controlDB)
	if _, err := install.Install(ctx, f.sql, install.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatalf("install: %v", err)
	}
	pool, err := pgxpool.New(ctx, f.controlDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.pool = pool
	f.promReg = prometheus.NewRegistry()
	f.admin, err = cluster.New(cluster.Config{
		Control: pool, ControlDSN: f.controlDSN, Metrics: metrics.New(f.promReg),
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = request.NewRegistry(sqlcontrol.Authorizer{Q: pool})
	f.admin.Register(f.reg)

	// Cleanups run last-registered first: prefixed objects, then the admin, then managed roles.
	f.prefix = "x" + strings.TrimPrefix(randomPrefix(t), "p")
	f.appRole, f.replRole = "dataenv_"+f.prefix+"app", "dataenv_"+f.prefix+"repl"
	external.DropRolesAtCleanup(t, f.appRole, f.replRole)
	f.adminUser, f.adminPW = external.CreateManagedAdmin(t)
	f.prefix = external.NamePrefix(t)
	f.name = f.prefix + "ext"
	f.exec(`SELECT dataenv.register_cluster($1, $2, $3, $4, $5, 'disable')`,
		f.name, external.Host(), external.Port(), f.adminUser, f.adminPW)
	f.exec(`SELECT dataenv.update_cluster($1, app_role => $2, replication_role => $3)`, f.name, f.appRole, f.replRole)
	return f
}

// randomPrefix is a fresh lowercase prefix for role names that NamePrefix does not clean.
func randomPrefix(t *testing.T) string {
	return strings.ReplaceAll(uuid.NewString()[:8], "-", "") + "_"
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.sql.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// sqlErr runs sql on the control database and returns its error (nil if it succeeded).
func (f *fixture) sqlErr(sql string, args ...any) error {
	f.t.Helper()
	_, err := f.sql.Exec(f.ctx, sql, args...)
	return err
}

// run calls the handler of kind directly, as the dispatcher does.
func (f *fixture) run(kind string, args map[string]any) (any, error, *recorder) {
	return f.runID(uuid.New(), kind, args)
}

func (f *fixture) runID(id uuid.UUID, kind string, args map[string]any) (any, error, *recorder) {
	f.t.Helper()
	h, ok := f.reg.Lookup(kind)
	if !ok {
		f.t.Fatalf("kind %s not registered", kind)
	}
	raw, _ := json.Marshal(args)
	rec := &recorder{}
	res, err := h.Handle(f.ctx, &request.Request{ID: id, Kind: kind, Args: raw, Status: request.Running, Attempts: 1,
		RequestedBy: control.SuperUser}, rec)
	return res, err, rec
}

// mustRun runs a request that must succeed.
func (f *fixture) mustRun(kind string, args map[string]any) any {
	f.t.Helper()
	res, err, _ := f.run(kind, args)
	if err != nil {
		f.t.Fatalf("%s %v: %v", kind, args, err)
	}
	return res
}

func (f *fixture) setup() *cluster.SetupResult {
	f.t.Helper()
	return f.mustRun(cluster.KindSetupCluster, map[string]any{"cluster": f.name}).(*cluster.SetupResult)
}

// ext opens a superuser connection to the external cluster's postgres database.
func (f *fixture) ext() *pgx.Conn {
	f.t.Helper()
	return external.Connect(f.t, "postgres")
}

// recorder is a request.Reporter that keeps the steps and signals each one.
type recorder struct {
	mu     sync.Mutex
	steps  []request.Step
	notify chan request.Step
}

func (r *recorder) Step(_ context.Context, s request.Step) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	ch := r.notify
	r.mu.Unlock()
	if ch != nil {
		ch <- s
	}
}

func (r *recorder) find(status string) (request.Step, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.steps {
		if s.Status == status {
			return s, true
		}
	}
	return request.Step{}, false
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(r.steps)
	return string(b)
}

func itoa(i int) string { return strconv.Itoa(i) }

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func newRequest(kind string, args map[string]any) *request.Request {
	raw, _ := json.Marshal(args)
	return &request.Request{ID: uuid.New(), Kind: kind, Args: raw, Status: request.Running, Attempts: 1,
		RequestedBy: control.SuperUser}
}

// eventually waits (up to 20 s) for cond, polling: a wait on a condition, not a timing assertion.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SQL helpers of the test harness, by this package's names.
var (
	queryString = testenv.QueryText
	queryInt    = testenv.Query[int]
	queryBool   = testenv.Query[bool]
	mustExec    = testenv.MustExec
)
