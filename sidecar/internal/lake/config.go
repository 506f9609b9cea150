package lake

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// extraOptions renders a lake's extra_args as ATTACH options, in name order, without the
// options named in drop.
func extraOptions(extra map[string]any, drop ...string) []Option {
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []Option
	for _, k := range names {
		out = append(out, Option{Name: k, Value: optionValue(extra[k])})
	}
	return withoutOptions(out, drop...)
}

func optionValue(v any) string {
	switch x := v.(type) {
	case string:
		return Literal(x)
	case bool:
		if x {
			return "TRUE"
		}
		return "FALSE"
	case float64:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%f", x), "0"), ".")
	default:
		b, _ := json.Marshal(x)
		return Literal(string(b))
	}
}

// stringArg returns extra_args[name] when it is a string.
func stringArg(extra map[string]any, name string) string {
	s, _ := extra[name].(string)
	return s
}
