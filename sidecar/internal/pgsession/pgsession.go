// Package pgsession pins the session settings of the connections dataenv opens to databases
// whose owner it does not control: managed databases, parents and fork copies on a cluster,
// satellite databases, and the control database (which may be the application's, owned by its
// role).
//
// The owner of a database may give every session in it a default for any setting an ordinary
// user may change (ALTER DATABASE ... SET), a superuser's sessions included, and so may a role
// for itself in one database. Left alone, such defaults steer dataenv's privileged sessions:
// role makes an administrator's session act as another role (its DDL then owned by, and its
// reads limited to, a role the owner chose); default_transaction_read_only, statement_timeout,
// lock_timeout and idle_in_transaction_session_timeout make every request on that database
// fail, and since a cancelled statement counts as a passing fault, retry until its attempts
// run out; standard_conforming_strings = off changes what a quoted literal means. A setting sent
// in the connection's startup packet outranks every such default, so the pinned values are sent
// there (Pin for pgx, Options for libpq tools in PGOPTIONS).
//
// Only settings every supported server knows are pinned (an unknown one fails the connection):
// transaction_timeout (PostgreSQL 17) is not among them.
package pgsession

import "strings"

// searchPath is the search_path of every pinned session: nothing dataenv runs resolves to an
// object another role created.
const searchPath = "pg_catalog, pg_temp"

// pinned are the settings and their values, in a fixed order (Options is stable).
var pinned = [][2]string{
	{"search_path", searchPath},
	{"role", "none"},
	{"default_transaction_read_only", "off"},
	{"default_transaction_isolation", "read committed"},
	{"default_transaction_deferrable", "off"},
	{"statement_timeout", "0"},
	{"lock_timeout", "0"},
	{"idle_in_transaction_session_timeout", "0"},
	{"standard_conforming_strings", "on"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"extra_float_digits", "1"},
}

// Pin sets the pinned settings in params (a pgx ConnConfig's RuntimeParams), replacing what
// the connection string gave for them.
func Pin(params map[string]string) {
	for _, p := range pinned {
		params[p[0]] = p[1]
	}
}

// Options is the PGOPTIONS value that pins the same settings for libpq tools (pg_dump,
// pg_restore, psql): "-c name=value" each, blanks escaped as libpq's option parser expects.
func Options() string {
	parts := make([]string, len(pinned))
	for i, p := range pinned {
		v := strings.ReplaceAll(strings.ReplaceAll(p[1], `\`, `\\`), " ", `\ `)
		parts[i] = "-c " + p[0] + "=" + v
	}
	return strings.Join(parts, " ")
}
