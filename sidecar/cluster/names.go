package cluster

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// Marker starts the ownership comment of every database and role dataenv creates on a cluster.
// Nothing whose comment lacks it is ever altered or dropped. Databases and datatable roles also
// carry the id of the request that created them, which is what a re-run after a crash checks
// before adopting one, and what a drop compares with the control record.
const Marker = "managed by dataenv"

// Kinds of marked objects, as they appear in the marker comment.
const (
	markedDatabase      = "database"
	markedManagedRole   = "managed role"
	markedDatatableRole = "datatable role"
)

// markerFor is the comment of an object of kind created by request req.
func markerFor(kind string, req uuid.UUID) string {
	return fmt.Sprintf("%s; %s; request %s", Marker, kind, req)
}

// managedRoleMarker is the comment of the managed roles setup converges.
func managedRoleMarker() string { return Marker + "; " + markedManagedRole }

// HasMarker reports whether comment is a dataenv ownership comment.
func HasMarker(comment string) bool { return strings.HasPrefix(comment, Marker) }

var (
	userName      = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	managedName   = regexp.MustCompile(`^dataenv_[a-z0-9_]+$`)
	internalName  = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	reservedDB    = map[string]bool{"postgres": true, "template0": true, "template1": true}
	reservedRoles = map[string]bool{"public": true, "none": true, "current_user": true, "current_role": true,
		"session_user": true, "user": true}
)

// NameError is a name that was refused; its text says why.
type NameError struct{ msg string }

func (e *NameError) Error() string { return e.msg }

// ValidateName applies to a user-chosen name of a cluster, database or role (what) the rule that
// dataenv.check_name applies in SQL: 1 to 63 bytes of lowercase ASCII letters, digits and
// underscores starting with a letter; no pg_ or dataenv_ prefix; not postgres/template0/template1
// for a database, not a name PostgreSQL reserves for a role.
//
// Quotes, semicolons, whitespace, upper case and non-ASCII are refused rather than quoted: the name
// then means the same in psql without quoting, its byte length is its length, and two names never
// differ only by case or Unicode normalization. Identifiers still always go through
// pgx.Identifier{}.Sanitize() when they reach SQL.
func ValidateName(what, name string) error {
	q := quoteForError(name)
	switch {
	case name == "":
		return &NameError{fmt.Sprintf("%s name is required (got %s)", what, q)}
	case len(name) > 63:
		return &NameError{fmt.Sprintf("%s name %s is %d bytes; the limit is 63 (PostgreSQL would truncate it)",
			what, quoteForError(truncate(name, 80)), len(name))}
	case !userName.MatchString(name):
		return &NameError{fmt.Sprintf("%s name %s is not allowed: names are lowercase ASCII letters, digits and "+
			"underscores, starting with a letter (no quotes, semicolons, whitespace, upper case or non-ASCII characters)", what, q)}
	case strings.HasPrefix(name, "pg_") || strings.HasPrefix(name, "dataenv_"):
		return &NameError{fmt.Sprintf("%s name %s uses a reserved prefix (pg_ or dataenv_)", what, q)}
	case what == "database" && reservedDB[name]:
		return &NameError{fmt.Sprintf("database name %s is reserved", q)}
	case what == "role" && reservedRoles[name]:
		return &NameError{fmt.Sprintf("role name %s is reserved", q)}
	}
	return nil
}

// validateManagedRole checks a managed role name (dataenv_ prefix required).
func validateManagedRole(name string) error {
	if len(name) > 63 || !managedName.MatchString(name) {
		return &NameError{fmt.Sprintf("managed role name %s is not allowed: dataenv_ followed by lowercase ASCII "+
			"letters, digits and underscores, at most 63 bytes", quoteForError(name))}
	}
	return nil
}

// validateInternalName checks a database name dataenv generates (fork databases use the reserved
// dataenv_ prefix): lowercase ASCII, digits and underscores, at most 63 bytes, not pg_*.
func validateInternalName(name string) error {
	if name == "" || len(name) > 63 || !internalName.MatchString(name) || strings.HasPrefix(name, "pg_") || reservedDB[name] {
		return &NameError{fmt.Sprintf("database name %s is not a valid dataenv database name", quoteForError(name))}
	}
	return nil
}

// quoteForError shows a name unambiguously (escaped control and non-printable characters).
func quoteForError(s string) string { return fmt.Sprintf("%q", s) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
