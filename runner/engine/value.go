package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// jsonValue maps what duckdb-go scans into a value encoding/json renders faithfully: exact
// numbers stay numbers (HUGEINT, DECIMAL as JSON numbers), dates and times as ISO strings,
// NaN and infinities as strings, nested LIST/STRUCT/MAP recursively.
func jsonValue(v any, dbType string) any {
	switch x := v.(type) {
	case nil, bool, string, int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return x
	case float32:
		return floatValue(float64(x))
	case float64:
		return floatValue(x)
	case *big.Int:
		return json.Number(x.String())
	case duckdb.Decimal:
		return json.Number(x.String())
	case duckdb.UUID:
		return x.String()
	case *duckdb.UUID:
		return x.String()
	case []byte:
		if dbType == "UUID" && len(x) == 16 {
			u := duckdb.UUID(x)
			return u.String()
		}
		return x
	case time.Time:
		return timeValue(x, dbType)
	case duckdb.Interval:
		return map[string]any{"months": x.Months, "days": x.Days, "micros": x.Micros}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e, "")
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e, "")
		}
		return out
	case duckdb.Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonValue(e, "")
		}
		return out
	case duckdb.OrderedMap:
		return x
	case duckdb.Union:
		return map[string]any{x.Tag: jsonValue(x.Value, "")}
	default:
		return fmt.Sprint(x)
	}
}

func floatValue(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	return f
}

func timeValue(t time.Time, dbType string) string {
	switch dbType {
	case "DATE":
		return t.Format(time.DateOnly)
	case "TIME":
		return t.Format("15:04:05.999999")
	case "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
		return t.Format(time.RFC3339Nano)
	default:
		if t.Location() == time.UTC {
			return t.Format("2006-01-02T15:04:05.999999999")
		}
		return t.Format(time.RFC3339Nano)
	}
}
