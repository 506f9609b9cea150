package lake

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Names of the persisted lake state of forks. They are stable across releases (registry rows,
// catalog schemas, object prefixes and defer views depend on them): never change the mangling,
// the lengths or the hash input; golden tests pin them.

const (
	// ForkSchemaPrefix starts every fork lake metadata schema; cleanup refuses any other.
	ForkSchemaPrefix = "dataenv_fork_"
	// ForkDataRoot is the storage-root prefix holding every fork's data.
	ForkDataRoot = "__dataenv_forks"
	// AncestorAliasPrefix starts every ancestor attach alias.
	AncestorAliasPrefix = "__dataenv_dl_"
)

// mangle lowercases s, turns every run of characters other than [a-z0-9] into one "_", trims
// "_" at both ends and cuts the result to max bytes (then trims a trailing "_" again). The
// result never contains "__".
func mangle(s string, max int) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	out := strings.Trim(b.String(), "_")
	if len(out) > max {
		out = strings.TrimRight(out[:max], "_")
	}
	if out == "" {
		out = "x"
	}
	return out
}

// hash8 is the first 4 bytes of SHA-256 over the parts joined by NUL, in hex: it keeps names
// injective after mangling.
func hash8(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:4])
}

// ForkMetadataSchema is the catalog schema of an isolated fork's lake:
// dataenv_fork_<workspace ≤24>_<lake ≤16>_<hash8>, at most 63 bytes, lake-scoped (two lakes of
// one workspace may share a catalog database).
func ForkMetadataSchema(workspace, lake string) string {
	return ForkSchemaPrefix + mangle(workspace, 24) + "_" + mangle(lake, 16) + "_" + hash8("schema", workspace, lake)
}

// ForkSegment is the one path segment of a fork under ForkDataRoot: the workspace id may hold
// "/", so it is mangled and hashed into a single component (a/b must not nest inside a's prefix).
func ForkSegment(workspace string) string {
	return mangle(workspace, 40) + "_" + hash8("segment", workspace)
}

// ForkDataPrefix is the fork's data prefix relative to the storage root:
// __dataenv_forks/<segment>/<data_path>/. It sits at the storage root, never under the parent's
// data path (the parent's orphan-file cleanup would delete live fork files there).
func ForkDataPrefix(workspace, dataPath string) string {
	return ForkGuard(workspace) + strings.Trim(dataPath, "/") + "/"
}

// ForkGuard is the prefix every delete of the fork's data must stay under.
func ForkGuard(workspace string) string {
	return ForkDataRoot + "/" + ForkSegment(workspace) + "/"
}

// AncestorAlias is the DuckDB alias under which an ancestor's namespace of lake is attached
// READ_ONLY: __dataenv_dl_<lake ≤16>_<ancestor ≤24>_<hash8>. The "__dataenv_dl_" prefix can occur
// only at the start (mangled parts never hold "__"), so no alias is a suffix of another.
func AncestorAlias(lake, ancestor string) string {
	return AncestorAliasPrefix + mangle(lake, 16) + "_" + mangle(ancestor, 24) + "_" + hash8("alias", lake, ancestor)
}
