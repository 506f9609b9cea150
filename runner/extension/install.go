package extension

import (
	"regexp"
	"strings"
)

// Install is one `[FORCE] INSTALL name [FROM community]` statement: the only forms the client
// installs outside the jail on a job's behalf (anything else, such as a URL or a file path, is
// left for DuckDB to handle inside the jail, where the cache is read-only).
type Install struct {
	Name      string
	Force     bool
	Community bool
}

var installRe = regexp.MustCompile(`(?is)^\s*(force\s+)?install\s+([a-z0-9_]+)(\s+from\s+community)?\s*;?\s*$`)

// ParseInstall recognises a block that is exactly one such statement.
func ParseInstall(stmt string) (Install, bool) {
	m := installRe.FindStringSubmatch(stmt)
	if m == nil {
		return Install{}, false
	}
	return Install{Name: strings.ToLower(m[2]), Force: m[1] != "", Community: m[3] != ""}, true
}

// String renders the statement.
func (i Install) String() string {
	s := "INSTALL " + i.Name
	if i.Force {
		s = "FORCE " + s
	}
	if i.Community {
		s += " FROM community"
	}
	return s
}
