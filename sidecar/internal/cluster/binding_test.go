package cluster_test

import (
	"strings"
	"testing"
)

// The check that a bound database is neither a template nor a dataenv installation comes with
// every job's attach; a database that passed it lately passes without another connection, and a
// refusal is never remembered. The full check (forks, grants) always connects.
func TestBoundDatabasesPassedLatelyAreNotCheckedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.workspace("prod")
	super := external.Connect(t, "postgres")
	passed, refused := external.CreateDatabase(t), external.CreateDatabase(t)
	setTemplate := func(db string, on bool) {
		t.Helper()
		v := "false"
		if on {
			v = "true"
		}
		if _, err := super.Exec(f.ctx, `ALTER DATABASE `+ident(db)+` IS_TEMPLATE `+v); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { setTemplate(passed, false); setTemplate(refused, false) })
	bound := func(db string) error {
		lp, err := f.admin.BoundWorkspaceLibpq(f.ctx, f.name, "prod", db)
		if err == nil {
			lp.Close()
		}
		return err
	}
	if err := bound(passed); err != nil {
		t.Fatal(err)
	}
	setTemplate(passed, true)
	if err := f.admin.CheckBindable(f.ctx, f.name, passed); err == nil || !strings.Contains(err.Error(), "is a template") {
		t.Fatalf("the full check of a template: %v", err)
	}
	if err := bound(passed); err != nil {
		t.Fatalf("a database that passed a moment ago was checked again: %v", err)
	}

	setTemplate(refused, true)
	if err := bound(refused); err == nil || !strings.Contains(err.Error(), "is a template") {
		t.Fatalf("a template was bound: %v", err)
	}
	setTemplate(refused, false)
	if err := bound(refused); err != nil {
		t.Fatalf("a refusal was remembered: %v", err)
	}
}
