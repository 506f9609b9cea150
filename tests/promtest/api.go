package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Result is the data of a successful /api/v1/query answer.
type Result struct {
	Type   string            `json:"resultType"` // vector, scalar, matrix or string
	Result []json.RawMessage `json:"-"`          // series of a vector or matrix
	Raw    json.RawMessage   `json:"result"`
}

// Len is the number of series of a vector or matrix; 1 for a scalar or string.
func (r Result) Len() int {
	if r.Type == "scalar" || r.Type == "string" {
		return 1
	}
	return len(r.Result)
}

type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// Query evaluates expr at the current time through /api/v1/query. A parse or evaluation error
// comes back as an error carrying Prometheus's message.
func (s *Server) Query(ctx context.Context, expr string) (Result, error) {
	var r Result
	if err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &r); err != nil {
		return r, err
	}
	if r.Type == "vector" || r.Type == "matrix" {
		if err := json.Unmarshal(r.Raw, &r.Result); err != nil {
			return r, fmt.Errorf("promtest: decode %s result: %w", r.Type, err)
		}
	}
	return r, nil
}

// RuleHealth maps every loaded rule name (alert or record) to its health ("ok", "err",
// "unknown") and last error, from /api/v1/rules.
func (s *Server) RuleHealth(ctx context.Context) (map[string]string, error) {
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get(ctx, "/api/v1/rules", nil, &data); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r.Health + optional(": ", r.LastError)
		}
	}
	return out, nil
}

func optional(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// WaitFor polls expr every 200 ms until cond accepts the result or ctx ends; it returns the last
// result and, on timeout, the last error or an error naming expr.
func (s *Server) WaitFor(ctx context.Context, expr string, cond func(Result) bool) (Result, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last Result
	var lastErr error
	for {
		last, lastErr = s.Query(ctx, expr)
		if lastErr == nil && cond(last) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = fmt.Errorf("promtest: %q never satisfied the condition (last: %s %s)", expr, last.Type, last.Raw)
			}
			return last, fmt.Errorf("%w (%v)", lastErr, ctx.Err())
		case <-s.exited:
			return last, fmt.Errorf("promtest: prometheus exited: %s", s.stderr.String())
		case <-tick.C:
		}
	}
}

// NonEmpty is a WaitFor condition: at least one series (or a scalar).
func NonEmpty(r Result) bool { return r.Len() > 0 }

func (s *Server) get(ctx context.Context, path string, q url.Values, data any) error {
	u := s.URL + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("promtest: %s: %w", path, err)
	}
	defer resp.Body.Close()
	var ar apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil {
		return fmt.Errorf("promtest: %s: HTTP %d: %w", path, resp.StatusCode, err)
	}
	if ar.Status != "success" {
		return fmt.Errorf("promtest: %s: %s: %s", path, ar.ErrorType, ar.Error)
	}
	return json.Unmarshal(ar.Data, data)
}

// HasNumber is a WaitFor condition: a vector with at least one sample that is a number (not NaN),
// or a scalar that is one. histogram_quantile over no observations yields NaN, which is no data.
func HasNumber(r Result) bool {
	if r.Type == "scalar" {
		var v [2]any
		return json.Unmarshal(r.Raw, &v) == nil && v[1] != "NaN"
	}
	for _, s := range r.Result {
		var sample struct {
			Value [2]any `json:"value"`
		}
		if json.Unmarshal(s, &sample) == nil && sample.Value[1] != nil && sample.Value[1] != "NaN" {
			return true
		}
	}
	return false
}
