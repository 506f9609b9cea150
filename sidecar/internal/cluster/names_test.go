package cluster_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

var badNames = []string{
	``, `a"b`, `a'b`, `a;b`, `x; DROP DATABASE postgres`, `a b`, ` a`, "a\tb", "a\nb",
	strings.Repeat("a", 64), strings.Repeat("é", 32), `pg_x`, `dataenv_x`, `ünïcode`, `café`, `Upper`,
	`1abc`, `_a`, `a-b`, `a.b`, `a$b`, "a\u200bb",
}

// TestBadNamesAreRefusedEverywhere: the same names are refused by the SQL rule at call time, by
// the request functions and by the handlers (which apply the same SQL rule again), and nothing is
// created on either cluster.
func TestBadNamesAreRefusedEverywhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext, ctl := f.ext(), control.Connect(t, "postgres")
	// Other tests run in parallel on the same clusters: count the objects named like the inputs.
	countObjects := func() int {
		q := `SELECT ((SELECT count(*) FROM pg_database WHERE datname::text = ANY($1::text[])) +
			(SELECT count(*) FROM pg_roles WHERE rolname::text = ANY($1::text[])))::int`
		return queryInt(t, ext, q, badNames) + queryInt(t, ctl, q, badNames)
	}
	before := countObjects()
	for _, name := range badNames {
		for _, what := range []string{"database", "role", "cluster"} {
			if err := f.sqlErr(`SELECT dataenv.check_name($1, $2)`, what, name); err == nil || !strings.Contains(err.Error(), "name") {
				t.Errorf("SQL accepted %s name %q: %v", what, name, err)
			}
		}
		if err := f.sqlErr(`SELECT dataenv.create_database($1, $2)`, f.name, name); err == nil {
			t.Errorf("create_database accepted %q", name)
		}
		if err := f.sqlErr(`SELECT dataenv.create_datatable_role($1, $2)`, f.name, name); err == nil {
			t.Errorf("create_datatable_role accepted %q", name)
		}
		if err := f.sqlErr(`SELECT dataenv.register_cluster($1, 'h', 5432, 'u', 'p', 'disable')`, name); err == nil {
			t.Errorf("register_cluster accepted %q", name)
		}
		if _, err, _ := f.run(cluster.KindCreateDatabase, dbArgs(f, name)); !request.IsRefused(err) {
			t.Errorf("create_database handler: %q: %v", name, err)
		}
		if _, err, _ := f.run(cluster.KindCreateDatatableRole, map[string]any{"cluster": f.name, "role": name}); !request.IsRefused(err) {
			t.Errorf("create_datatable_role handler: %q: %v", name, err)
		}
	}
	if after := countObjects(); after != before {
		t.Fatalf("objects on the clusters went from %d to %d", before, after)
	}
	if n := queryInt(t, f.sql, `SELECT ((SELECT count(*) FROM dataenv.requests) + (SELECT count(*) FROM dataenv.managed_databases)
		+ (SELECT count(*) FROM dataenv.datatable_roles))::int`); n != 0 {
		t.Fatalf("%d rows recorded", n)
	}
}
