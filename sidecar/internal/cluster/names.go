package cluster

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/google/uuid"
)

// Databases and datatable roles carry, after names.Marker, the id of the request that created
// them: what a re-run after a crash checks before adopting one, and what a drop compares with the
// control record.

// Kinds of marked objects, as they appear in the marker comment.
const (
	markedDatabase      = "database"
	markedManagedRole   = "managed role"
	markedDatatableRole = "datatable role"
)

// markerFor is the comment of an object of kind created by request req.
func markerFor(kind string, req uuid.UUID) string {
	return fmt.Sprintf("%s; %s; request %s", names.Marker, kind, req)
}

// managedRoleMarker is the comment of the managed roles setup converges.
func managedRoleMarker() string { return names.Marker + "; " + markedManagedRole }

// HasMarker reports whether comment is a dataenv ownership comment.
func HasMarker(comment string) bool { return strings.HasPrefix(comment, names.Marker) }

var (
	internalName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	reservedDB   = map[string]bool{"postgres": true, "template0": true, "template1": true}
)

// NameError is a generated name that was refused; its text says why.
type NameError struct{ msg string }

func (e *NameError) Error() string { return e.msg }

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
