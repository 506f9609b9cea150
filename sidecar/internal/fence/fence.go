// Package fence names every session the sidecar opens and ends the sessions of work that is no
// longer anyone's: earlier attempts of a request, and sidecar instances that no longer lead.
//
// A backend outlives the client that opened it: after a SIGKILL of the sidecar, its CREATE
// DATABASE, pg_restore or DuckLake bootstrap keeps running on the server until the statement
// ends. A new attempt of the same request that acted at once would race it (a unique violation on
// the staging database's name, a half-restored copy dropped under a running restore). So every
// session says in its application_name whose it is, and a new attempt ends the sessions of
// earlier ones (pg_terminate_backend, which an admin role may do for its own backends) and waits
// until they are gone before it re-checks state and acts.
//
// # application_name
//
// At most 63 bytes (NAMEDATALEN-1, what the server keeps), slash-separated:
//
//	dataenv/<instance>/<request>/<attempt>   a side effect of one attempt of a request
//	dataenv/<instance>/<role>                the sidecar's own sessions: control, leader,
//	                                         replication, gate
//
// <instance> is the first 12 hex digits of the sidecar process's instance id (the instance_id
// of its dataenv.sidecars row), <request> the request id's 32 hex digits, <attempt> the attempt
// number in decimal. libpq tools get the same name through PGAPPNAME, DuckDB's catalog
// connections through application_name in their connection string.
package fence

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Prefix starts every application_name the sidecar sets.
const Prefix = "dataenv/"

// Session roles of the sidecar's own control-database sessions.
const (
	RoleControl     = "control"     // the control pool
	RoleLeader      = "leader"      // the leader election lock
	RoleReplication = "replication" // the walsender of the slot
	RoleGate        = "gate"        // the request gates dataenv.wait() queues on
)

// InstanceTag is the short form of an instance id used in application names (12 hex digits).
func InstanceTag(instance uuid.UUID) string { return hex.EncodeToString(instance[:6]) }

// SessionName is the application_name of one of the sidecar's own sessions (a Role* constant).
func SessionName(instance uuid.UUID, role string) string {
	return Prefix + InstanceTag(instance) + "/" + role
}

// Tag is a parsed application_name.
type Tag struct {
	Instance string    // 12 hex digits
	Role     string    // a Role* constant, "" for an attempt's session
	Request  uuid.UUID // uuid.Nil for the sidecar's own sessions
	Attempt  int
}

// Parse reads an application_name the sidecar set; ok is false for any other name.
func Parse(name string) (Tag, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return Tag{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts[0]) != 12 || !isHex(parts[0]) {
		return Tag{}, false
	}
	t := Tag{Instance: parts[0]}
	switch len(parts) {
	case 2:
		t.Role = parts[1]
		return t, t.Role != ""
	case 3:
		b, err := hex.DecodeString(parts[1])
		if err != nil || len(b) != 16 {
			return Tag{}, false
		}
		copy(t.Request[:], b)
		if t.Attempt, err = strconv.Atoi(parts[2]); err != nil || t.Attempt < 0 {
			return Tag{}, false
		}
		return t, true
	}
	return Tag{}, false
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// Attempt is one attempt of a request, as the dispatcher runs it: carried in the handler's
// context, it names the attempt's sessions and remembers which clusters it has fenced.
type Attempt struct {
	Instance uuid.UUID
	Request  uuid.UUID
	Number   int
	// Reporter records a step of the request's report (may be nil).
	Reporter func(name, status, detail string)

	mu     sync.Mutex
	fenced map[string]bool
}

// AppName is the application_name of this attempt's sessions (at most 63 bytes for attempt
// numbers below 10^9).
func (a *Attempt) AppName() string {
	return Prefix + InstanceTag(a.Instance) + "/" + hex.EncodeToString(a.Request[:]) + "/" + strconv.Itoa(a.Number)
}

// Report records a step of the attempt's request, if it has a reporter.
func (a *Attempt) Report(name, status, detail string) {
	if a.Reporter != nil {
		a.Reporter(name, status, detail)
	}
}

// Fenced reports whether the attempt has fenced the server identified by key.
func (a *Attempt) Fenced(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fenced[key]
}

// MarkFenced records that the attempt fenced key; Unfence forgets it (fence again next time).
func (a *Attempt) MarkFenced(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fenced == nil {
		a.fenced = map[string]bool{}
	}
	a.fenced[key] = true
}

// Unfence makes the next connection to key fence again.
func (a *Attempt) Unfence(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.fenced, key)
}

type attemptKey struct{}

// WithAttempt returns ctx carrying a.
func WithAttempt(ctx context.Context, a *Attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// FromContext returns the attempt ctx carries, or nil outside a request's handler.
func FromContext(ctx context.Context) *Attempt {
	a, _ := ctx.Value(attemptKey{}).(*Attempt)
	return a
}

// AppName is the application_name for a session opened with ctx: the attempt's, or def outside
// a request.
func AppName(ctx context.Context, def string) string {
	if a := FromContext(ctx); a != nil {
		return a.AppName()
	}
	return def
}
