package workspace

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
)

// configRelation is a configuration table or sequence of an extension (pg_extension_config_dump):
// its rows are the extension's settings that a dump carries (PostGIS's own spatial_ref_sys
// entries, pg_partman's partition sets).
type configRelation struct {
	Name     string `json:"name"` // schema-qualified, quoted
	OID      uint32 `json:"oid"`  // in the parent
	Sequence bool   `json:"sequence"`
	// Condition is the WHERE clause the extension's script gave (pg_extension.extcondition), ""
	// for every row: the rows the script itself inserts are left to it.
	Condition string `json:"condition"`
}

// copyConfigRows copies, as the admin, the rows of the configuration tables (and the positions
// of the configuration sequences) of the extensions the admin made in a full copy by dump, from
// the parent (src) into the copy (dst), as pg_dump would have: the restore, run as the copy's
// owner, may not write them. It runs while the copy is still the admin's (prepareFor): only the
// extensions' code runs, on tables of the admin's, and their conditions were written by the
// extensions' scripts.
func copyConfigRows(ctx context.Context, src, dst *pgx.Conn, exts []adminExtension) error {
	for _, e := range exts {
		for _, c := range e.Config {
			var err error
			if c.Sequence {
				err = copySequencePosition(ctx, src, dst, c.Name)
			} else {
				err = copyTableRows(ctx, src, dst, c)
			}
			if err != nil {
				return fmt.Errorf("copy %s, a configuration relation of extension %s: %w", c.Name, e.Name, err)
			}
		}
	}
	return nil
}

// copyTableRows streams the parent's rows of c into the copy's table (binary COPY: the table is
// the same extension's, at the same version).
func copyTableRows(ctx context.Context, src, dst *pgx.Conn, c configRelation) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := src.PgConn().CopyTo(ctx, pw, "COPY (SELECT * FROM ONLY "+c.Name+" "+c.Condition+") TO STDOUT (FORMAT binary)")
		_ = pw.CloseWithError(err)
		done <- err
	}()
	_, err := dst.PgConn().CopyFrom(ctx, pr, "COPY "+c.Name+" FROM STDIN (FORMAT binary)")
	_ = pr.CloseWithError(io.ErrClosedPipe) // a COPY FROM that failed first unblocks the reader's side
	if rerr := <-done; err == nil && rerr != nil {
		err = rerr
	}
	return err
}

func copySequencePosition(ctx context.Context, src, dst *pgx.Conn, name string) error {
	var last int64
	var called bool
	if err := src.QueryRow(ctx, "SELECT last_value, is_called FROM "+name).Scan(&last, &called); err != nil {
		return err
	}
	_, err := dst.Exec(ctx, "SELECT pg_catalog.setval($1::pg_catalog.regclass, $2, $3)", name, last, called)
	return err
}
