package replication

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// Op is the kind of a decoded row change.
type Op byte

const (
	Insert Op = 'I'
	Update Op = 'U'
)

// Change is one decoded row change of a published table. Values are in Postgres text format; a
// nil value is NULL. Unchanged TOASTed columns of an update are absent from Values.
type Change struct {
	Table  string // unqualified table name in the dataenv schema
	Op     Op
	Values map[string]*string
}

// Tx is one committed transaction's changes to the published tables.
type Tx struct {
	Xid        uint32
	CommitLSN  pglogrepl.LSN
	EndLSN     pglogrepl.LSN
	CommitTime time.Time
	Changes    []Change
}

// Value returns the column's text value and whether it was present and not NULL.
func (c Change) Value(col string) (string, bool) {
	v, ok := c.Values[col]
	if !ok || v == nil {
		return "", false
	}
	return *v, true
}
