package cluster_test

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// TestAdminPasswordNeverLeaks: after successful and failing requests, the admin password is in
// no log line, request row, metric or error text.
func TestAdminPasswordNeverLeaks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var texts []string
	collect := func(res any, err error, rec *recorder) {
		if err != nil {
			texts = append(texts, err.Error())
		}
		texts = append(texts, rec.String())
	}
	res, err, rec := f.run(cluster.KindSetupCluster, map[string]any{"cluster": f.name})
	collect(res, err, rec)
	db := f.prefix + "db"
	collect(f.run(cluster.KindCreateDatabase, dbArgs(f, db)))
	collect(f.run(cluster.KindDropDatabase, dbArgs(f, db)))

	// A wrong password: the request fails on authentication, without echoing either password.
	wrong := "wrong-" + f.adminPW
	f.exec(`SELECT dataenv.update_cluster($1, admin_password => $2)`, f.name, wrong)
	res, err, rec = f.run(cluster.KindSetupCluster, map[string]any{"cluster": f.name})
	if err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("setup with a wrong password: %v", err)
	}
	collect(res, err, rec)
	_, err = f.admin.Connect(f.ctx, f.name, "postgres")
	collect(nil, err, &recorder{})

	// Requests made through SQL carry no password.
	f.exec(`SELECT dataenv.setup_cluster($1)`, f.name)
	texts = append(texts, queryString(t, f.sql, `SELECT string_agg(row_to_json(r)::text, ' ') FROM dataenv.requests r`))

	var metricsText bytes.Buffer
	families, err := f.promReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		_, _ = expfmt.MetricFamilyToText(&metricsText, mf)
	}
	texts = append(texts, metricsText.String(), f.logs.String())
	if !strings.Contains(metricsText.String(), "dataenv_side_effects_total") || f.logs.String() == "" {
		t.Fatal("nothing was captured: the grep below would prove nothing")
	}
	for _, s := range texts {
		for _, secret := range []string{f.adminPW, wrong} {
			if strings.Contains(s, secret) {
				t.Fatalf("a password leaked into: %s", s)
			}
		}
	}
}

// TestSecretsAreNotReadableByUsers: neither dataenv_user nor dataenv_admin can read the secrets,
// the clusters table or anything but the secret-free views.
func TestSecretsAreNotReadableByUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, group := range []string{"dataenv_user", "dataenv_admin"} {
		user, pw := control.CreateRole(t, "LOGIN IN ROLE "+group)
		conn := control.ConnectAs(t, user, pw, f.controlDB)
		for _, q := range []string{`SELECT * FROM dataenv.cluster_secrets`, `SELECT * FROM dataenv.clusters`} {
			if _, err := conn.Exec(f.ctx, q); err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Fatalf("%s: %s: %v", group, q, err)
			}
		}
		row := queryString(t, conn, `SELECT string_agg(row_to_json(c)::text, ' ') FROM dataenv.cluster_info c`)
		if !strings.Contains(row, f.name) || strings.Contains(row, f.adminPW) {
			t.Fatalf("%s: cluster_info: %s", group, row)
		}
		_, err := conn.Exec(f.ctx, `SELECT dataenv.register_cluster($1, 'h', 5432, 'u', 'p', 'disable')`, f.prefix+"other")
		if group == "dataenv_user" && (err == nil || !strings.Contains(err.Error(), "permission denied")) {
			t.Fatalf("dataenv_user registered a cluster: %v", err)
		}
		if group == "dataenv_admin" && err != nil {
			t.Fatalf("dataenv_admin could not register a cluster: %v", err)
		}
		// Cluster requests are an administrator's, even through a plain INSERT.
		_, err = conn.Exec(f.ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ('setup_cluster', jsonb_build_object('cluster', $1::text))`, f.name)
		if group == "dataenv_user" && (err == nil || !strings.Contains(err.Error(), "permission denied")) {
			t.Fatalf("dataenv_user inserted a cluster request: %v", err)
		}
		if group == "dataenv_admin" && err != nil {
			t.Fatalf("dataenv_admin could not insert a cluster request: %v", err)
		}
		// The sidecar checks the requester again.
		h, _ := f.reg.Lookup(cluster.KindSetupCluster)
		req := newRequest(cluster.KindSetupCluster, map[string]any{"cluster": f.name})
		req.RequestedBy = user
		_, err = h.Handle(f.ctx, req, &recorder{})
		if group == "dataenv_user" && !request.IsRefused(err) {
			t.Fatalf("the handler accepted a request of a dataenv_user: %v", err)
		}
	}
}

// TestLibpqEnvironmentRunsPgDump: the env for libpq tools reaches the database (pg_dump), as the
// admin and as a workspace's role.
func TestLibpqEnvironmentRunsPgDump(t *testing.T) {
	t.Parallel()
	pgDump := pgDumpFor(t, external.Major)
	f := newFixture(t)
	f.setup()
	db := f.prefix + "dumped"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	err := f.admin.WithLifecycleLock(f.ctx, f.name, nil, func(ctx context.Context, l *cluster.Locked) error {
		conn, err := l.Connect(ctx, db)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `SET ROLE `+ident(f.appRole)+`; CREATE TABLE public.t (id int)`)
		return err
	})
	if err != nil {
		t.Fatalf("as the application role: %v", err)
	}
	lp, err := f.admin.Libpq(f.ctx, f.name, db)
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	cmd := exec.CommandContext(f.ctx, pgDump, "--schema-only")
	cmd.Env = lp.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "CREATE TABLE public.t") {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	if strings.Contains(strings.Join(cmd.Args, " "), f.adminPW) {
		t.Fatal("the password is on the command line")
	}
	role := f.workspace("prod")
	if err := f.admin.GrantDatatable(f.ctx, f.name, "prod", db); err != nil {
		t.Fatal(err)
	}
	wlp, err := f.admin.WorkspaceLibpq(f.ctx, f.name, "prod", db)
	if err != nil {
		t.Fatal(err)
	}
	defer wlp.Close()
	if !slices.Contains(wlp.Env, "PGUSER="+role) {
		t.Fatalf("the workspace env connects as %v", wlp.Env[2])
	}
	cmd = exec.CommandContext(f.ctx, pgDump, "--schema-only")
	cmd.Env = wlp.Environ()
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "CREATE TABLE public.t") {
		t.Fatalf("pg_dump as the workspace role: %v\n%s", err, out)
	}
}
