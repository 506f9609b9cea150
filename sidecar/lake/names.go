package lake

import (
	"strings"

	"github.com/dataenv/dataenv/sidecar/names"
)

// The lake names come from sidecar/names (frozen, golden-tested there); these helpers put them
// together the way the lake code needs them.

const (
	// ForkSchemaPrefix starts every fork lake metadata schema; cleanup refuses any other.
	ForkSchemaPrefix = names.ForkPrefix
	// ForkDataRoot is the storage-root directory holding every fork's data.
	ForkDataRoot = names.ForkDataDir
	// AncestorAliasPrefix starts every ancestor attach alias.
	AncestorAliasPrefix = names.AliasPrefix
)

// ForkMetadataSchema is the catalog schema of an isolated fork's lake.
func ForkMetadataSchema(workspace, lake string) string { return names.ForkLakeSchema(workspace, lake) }

// ForkSegment is the one path segment of a fork under ForkDataRoot.
func ForkSegment(workspace string) string { return names.ForkDataSegment(workspace) }

// ForkGuard is the prefix (relative to the storage root) every delete of the fork's data must
// stay under: __dataenv_forks/<segment>/.
func ForkGuard(workspace string) string { return ForkDataRoot + "/" + ForkSegment(workspace) + "/" }

// ForkDataPrefix is the fork's data prefix of a lake relative to the storage root:
// __dataenv_forks/<segment>/<data_path>/. It sits at the storage root, never under the parent's
// data path (the parent's orphan-file cleanup would delete live fork files there).
func ForkDataPrefix(workspace, dataPath string) string {
	return ForkGuard(workspace) + strings.Trim(dataPath, "/") + "/"
}

// AncestorAlias is the alias an ancestor's namespace of lake is attached under, READ_ONLY.
func AncestorAlias(lake, ancestor string) string { return names.AncestorAlias(lake, ancestor) }
