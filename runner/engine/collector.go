package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/dataenv/dataenv/runner/protocol"
)

// collector turns rows into JSON and stops keeping them once the job's results reach the byte
// limit, so a huge result costs the runner no more than the limit.
type collector struct {
	limit int64
	used  int64
}

func newCollector(limit int64) *collector { return &collector{limit: limit} }

func (c *collector) query(ctx context.Context, conn *sql.Conn, block int, text string) (*protocol.Result, error) {
	rows, err := conn.QueryContext(ctx, text)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	res := &protocol.Result{Block: block, Columns: make([]protocol.Column, len(types)), Rows: [][]json.RawMessage{}}
	for i, ct := range types {
		res.Columns[i] = protocol.Column{Name: ct.Name(), Type: ct.DatabaseTypeName()}
	}
	vals := make([]any, len(types))
	ptrs := make([]any, len(types))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row, size, err := encodeRow(vals, res.Columns)
		if err != nil {
			return nil, err
		}
		if c.used+size > c.limit {
			res.Truncated = true
			break
		}
		c.used += size
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// forget gives back the budget of a result that is not kept (collect last only).
func (c *collector) forget(res *protocol.Result) {
	for _, row := range res.Rows {
		c.used -= rowSize(row)
	}
}

func encodeRow(vals []any, cols []protocol.Column) ([]json.RawMessage, int64, error) {
	row := make([]json.RawMessage, len(vals))
	for i, v := range vals {
		b, err := json.Marshal(jsonValue(v, cols[i].Type))
		if err != nil {
			return nil, 0, fmt.Errorf("column %q: %w", cols[i].Name, err)
		}
		row[i] = b
	}
	return row, rowSize(row), nil
}

// rowSize is what a row adds to the result's JSON: its values, the commas between them, its
// brackets and the comma after it. The limit then bounds the result file, not just the values.
func rowSize(row []json.RawMessage) int64 {
	size := int64(len(row)) + 2
	for _, v := range row {
		size += int64(len(v))
	}
	return size
}
