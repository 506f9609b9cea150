package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/protocol"
)

// The byte limit bounds the rows' JSON as written, even for many tiny rows.
func TestResultLimitBoundsTheJSON(t *testing.T) {
	const limit = 50000
	resp := engine.Run(context.Background(), &protocol.Request{
		Blocks: []string{"SELECT 1 AS x FROM range(1000000)"}, MaxResultBytes: limit,
	}, nil)
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	rows, _ := json.Marshal(resp.Results[0].Rows)
	if !resp.Results[0].Truncated || len(rows) > limit+2 || len(rows) < limit/2 {
		t.Fatalf("truncated %v, rows JSON %d bytes; want truncated at about %d", resp.Results[0].Truncated, len(rows), limit)
	}
}

// Values keep their DuckDB meaning in JSON: exact big numbers, ISO dates, nested types, NaN.
func TestValuesAsJSON(t *testing.T) {
	resp := engine.Run(context.Background(), &protocol.Request{Blocks: []string{`SELECT
		170141183460469231731687303715884105727::HUGEINT AS h, 12.50::DECIMAL(10,2) AS d,
		DATE '2024-01-02' AS day, TIMESTAMP '2024-01-02 03:04:05' AS ts, [1, 2] AS l,
		{'k': 'v'} AS s, 'nan'::DOUBLE AS f, NULL AS n, 'a"b' AS q`}}, nil)
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	got, _ := json.Marshal(resp.Results[0].Rows[0])
	want := `[170141183460469231731687303715884105727,12.5,"2024-01-02","2024-01-02T03:04:05",[1,2],{"k":"v"},"NaN",null,"a\"b"]`
	if string(got) != want {
		t.Fatalf("row\n got %s\nwant %s", got, want)
	}
}
