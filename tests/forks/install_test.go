package forks_test

import (
	"testing"

	"github.com/dataenv/dataenv/sidecar/install"
)

// The API bundle re-applies cleanly over itself.
func TestInstallTwice(t *testing.T) {
	t.Parallel()
	db := control.CreateDatabase(t)
	conn := control.Connect(t, db)
	for range 2 {
		if _, err := install.Install(t.Context(), conn, install.Options{Logger: discard}); err != nil {
			t.Fatalf("install: %v", err)
		}
	}
	mustExec(t, conn, `SELECT dataenv.create_workspace('smoke')`)
}
