// Package names computes every name dataenv derives from user-chosen identifiers: fork
// databases, fork lake metadata schemas, fork data path segments and ancestor attach aliases.
//
// Persisted state depends on these names (a fork database is found again by its name, a lake
// namespace by its schema, a fork's files by their prefix), so every function here is frozen:
// golden tests pin their outputs, and a change that moves any golden value breaks every existing
// fork. Add a new function instead of changing one.
//
// # Shape
//
// Each name is a fixed prefix, mangled readable parts, and an 8-hex-digit hash:
//
//	ForkDatabase(ws, dt)        dataenv_fork_<ws:24>_<dt:16>_<hash8>            (at most 63 bytes)
//	ForkLakeSchema(ws, lake)    dataenv_fork_<ws:24>_<lake:16>_<hash8>          (at most 63 bytes)
//	ForkDataSegment(ws)         <ws:40>_<hash8>                                 (one path component)
//	AncestorAlias(lake, anc)    __dataenv_dl_<lake:16>_<anc:24>_<hash8>         (at most 63 bytes)
//	SchemaTemplate(ws, dt, b)   dataenv_tpl_<ws:24>_<dt:16>_<hash8>             (at most 62 bytes)
//	WorkspaceRole(inst, c, ws)  dataenv_ws_<ws:40>_<hash8>                      (at most 60 bytes)
//	SpareRole(ws, spare)        dataenv_spare_<ws:24>_<hash8>                   (at most 47 bytes)
//
// Mangling lowercases ASCII letters, turns every other character that is not [a-z0-9] into '_'
// and truncates to the width shown. Mangling alone is lossy ("a-b" and "a_b" mangle alike, long
// names truncate alike), so the hash is what makes a name injective: it is the first 4 bytes of
// SHA-256 over a kind tag and the UNMANGLED inputs, each length-prefixed, so two different input
// tuples never hash the same bytes. Distinct inputs share a name only if their readable parts are
// equal AND a 32-bit hash collides.
//
// # Ancestor aliases are never suffixes of one another
//
// Alias parts are mangled compactly: runs of '_' collapse to one, leading/trailing '_' are
// trimmed and an empty part becomes "x", so "__" occurs in an alias only at its start. A proper suffix of an alias that is
// itself an alias would have to start with "__" somewhere after position 0, which cannot happen;
// code that recognizes aliases by suffix (a qualified name ending in an alias) can never confuse
// two ancestors.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Prefixes of the generated names. ForkPrefix is also the guard every cleanup checks before it
// drops a database or schema; AliasPrefix marks ancestor attaches; ForkDataDir is the directory
// at the storage root under which every fork's files live.
const (
	ForkPrefix  = "dataenv_fork_"
	AliasPrefix = "__dataenv_dl_"
	ForkDataDir = "__dataenv_forks"
	// TemplatePrefix starts every schema template's database name; the template cleanup checks it.
	TemplatePrefix = "dataenv_tpl_"
	// WorkspaceRolePrefix starts the name of every per-workspace managed role.
	WorkspaceRolePrefix = "dataenv_ws_"
	// SpareRolePrefix starts the name of the role that owns a schema template spare's objects.
	SpareRolePrefix = "dataenv_spare_"
)

// Marker starts the ownership comment of every database, role and schema dataenv creates.
// Nothing whose comment lacks it is ever altered or dropped.
const Marker = "managed by dataenv"

// MaxIdentifier is PostgreSQL's identifier limit in bytes (NAMEDATALEN-1).
const MaxIdentifier = 63

const (
	workspaceWidth = 24 // workspace part of database and schema names
	objectWidth    = 16 // datatable or lake part
	segmentWidth   = 40 // workspace part of a data path segment
	roleWidth      = 40 // workspace part of a workspace role name
)

// Hash kind tags: the same inputs hash differently for different kinds of names.
const (
	tagDatabase = "database"
	tagSchema   = "lake schema"
	tagSegment  = "data segment"
	tagAlias    = "ancestor alias"
	tagTemplate = "schema template"
	tagRole     = "workspace role"
	tagSpare    = "spare role"
	tagTaken    = "taken spare role"
	tagDiscard  = "discarded fork copy"
)

// ForkDatabase is the name of the database holding workspace's copy of datatable:
// dataenv_fork_<mangled workspace>_<mangled datatable>_<hash8>, at most 63 bytes.
func ForkDatabase(workspace, datatable string) string {
	return ForkPrefix + mangle(workspace, workspaceWidth) + "_" + mangle(datatable, objectWidth) + "_" +
		hash8(tagDatabase, workspace, datatable)
}

// ForkLakeSchema is the metadata schema of workspace's namespace of lake in the lake's catalog
// database: dataenv_fork_<mangled workspace>_<mangled lake>_<hash8>, at most 63 bytes. It is
// lake-scoped: two lakes of a workspace may share a catalog database and must not share a
// namespace.
func ForkLakeSchema(workspace, lake string) string {
	return ForkPrefix + mangle(workspace, workspaceWidth) + "_" + mangle(lake, objectWidth) + "_" +
		hash8(tagSchema, workspace, lake)
}

// ForkDataSegment is workspace's directory under <storage>/__dataenv_forks/: ONE path component
// of [a-z0-9_] (a workspace id may contain '/', which used raw would nest one fork's files inside
// another's cleanup prefix).
func ForkDataSegment(workspace string) string {
	return mangle(workspace, segmentWidth) + "_" + hash8(tagSegment, workspace)
}

// ForkDataPrefix is the root of everything workspace writes into storage as a fork, with a
// trailing '/': <storage>/__dataenv_forks/<segment>/. It sits at the storage root, never under a
// parent's data path, because lake maintenance deletes unknown files under a lake's data path.
func ForkDataPrefix(storageURL, workspace string) string {
	return strings.TrimRight(storageURL, "/") + "/" + ForkDataDir + "/" + ForkDataSegment(workspace) + "/"
}

// ForkDataPath is where workspace's fork of a lake whose files live at <storage>/<dataPath>
// writes: <storage>/__dataenv_forks/<segment>/<dataPath>.
func ForkDataPath(storageURL, workspace, dataPath string) string {
	return ForkDataPrefix(storageURL, workspace) + strings.TrimLeft(dataPath, "/")
}

// ForkDataGuard is the prefix, relative to the storage root, that every delete of workspace's
// fork data must stay under: __dataenv_forks/<segment>/.
func ForkDataGuard(workspace string) string {
	return ForkDataDir + "/" + ForkDataSegment(workspace) + "/"
}

// ForkLakeDataPrefix is workspace's data prefix of a lake whose files live at <dataPath>,
// relative to the storage root: __dataenv_forks/<segment>/<dataPath>/.
func ForkLakeDataPrefix(workspace, dataPath string) string {
	return ForkDataGuard(workspace) + strings.Trim(dataPath, "/") + "/"
}

// AncestorAlias is the DuckDB alias under which a fork attaches ancestor's namespace of lake
// READ_ONLY: __dataenv_dl_<lake>_<ancestor>_<hash8>, at most 63 bytes, and never a suffix of
// another alias (see the package doc).
func AncestorAlias(lake, ancestor string) string {
	return AliasPrefix + compact(lake, objectWidth) + "_" + compact(ancestor, workspaceWidth) + "_" +
		hash8(tagAlias, lake, ancestor)
}

// DiscardedForkCopy is the name request gave workspace's copy of datatable when it discarded the
// copy before it was finished: release 2794061 took a spare for a copy before the parent's schema
// was known, and set the copy aside under this name when the schema had changed. Only rows that
// release left have such names; a request run again cleans them up (workspace's discardedOf).
// dataenv_fork_<mangled workspace>_<mangled datatable>_<hash8>, at most 63 bytes: ForkPrefix, the
// guard of every copy cleanup, included.
func DiscardedForkCopy(workspace, datatable, request string) string {
	return ForkPrefix + mangle(workspace, workspaceWidth) + "_" + mangle(datatable, objectWidth) + "_" +
		hash8(tagDiscard, workspace, datatable, request)
}

// SchemaTemplate is the database holding the schema template of datatable of workspace made by
// build (the request that builds it: a rebuild gets a new name, so the old template can be
// dropped after the new one is ready): dataenv_tpl_<mangled workspace>_<mangled datatable>_<hash8>.
func SchemaTemplate(workspace, datatable, build string) string {
	return TemplatePrefix + mangle(workspace, workspaceWidth) + "_" + mangle(datatable, objectWidth) + "_" +
		hash8(tagTemplate, workspace, datatable, build)
}

// WorkspaceRole is the name of workspace's managed role on a cluster:
// dataenv_ws_<mangled workspace>_<hash8>, at most 60 bytes. Roles are cluster-wide while
// workspaces belong to one installation, and one installation may register a physical cluster
// under two names, so the hash covers the installation id (dataenv.installation.id) and the
// cluster's name as well as the workspace id: two installations administering one cluster never
// compute the same name for their workspaces.
func WorkspaceRole(installation, cluster, workspace string) string {
	return WorkspaceRolePrefix + mangle(workspace, roleWidth) + "_" + hash8(tagRole, installation, cluster, workspace)
}

// SpareRole is the name of the role owning the objects of spare, a spare database of a schema
// template of workspace's entry (SchemaTemplate): dataenv_spare_<mangled workspace>_<hash8>. The
// spare's name is unique to the request that builds it, and so is the role.
func SpareRole(workspace, spare string) string {
	return SpareRolePrefix + mangle(workspace, workspaceWidth) + "_" + hash8(tagSpare, workspace, spare)
}

// TakenSpareRole is the name a spare's role takes when request takes the spare for workspace's
// datatable without making the role its workspace role (that role exists): the role keeps owning
// the copy's objects until the copy's finish re-owns them and drops it. Derived from what the
// copy's registry row keeps whatever the copy's database is renamed to, so the copy's drop finds
// the role: dataenv_spare_<mangled workspace>_<hash8>.
func TakenSpareRole(workspace, request, datatable string) string {
	return SpareRolePrefix + mangle(workspace, workspaceWidth) + "_" + hash8(tagTaken, workspace, request, datatable)
}

// mangle lowercases ASCII letters, replaces every other byte outside [a-z0-9] by '_' (so a
// multi-byte character becomes several '_') and keeps the first max bytes.
func mangle(s string, max int) string {
	b := make([]byte, 0, min(len(s), max))
	for i := 0; i < len(s) && len(b) < max; i++ {
		b = append(b, mangleByte(s[i]))
	}
	return string(b)
}

// compact is mangle with runs of '_' collapsed and leading/trailing '_' removed; an input with
// nothing left becomes "x".
func compact(s string, max int) string {
	b := make([]byte, 0, min(len(s), max))
	for i := 0; i < len(s) && len(b) < max; i++ {
		c := mangleByte(s[i])
		if c == '_' && (len(b) == 0 || b[len(b)-1] == '_') {
			continue
		}
		b = append(b, c)
	}
	if out := strings.TrimRight(string(b), "_"); out != "" {
		return out
	}
	return "x" // never empty: an empty part would put "__" after the prefix
}

func mangleByte(c byte) byte {
	switch {
	case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		return c
	case c >= 'A' && c <= 'Z':
		return c + ('a' - 'A')
	}
	return '_'
}

// hash8 is the first 4 bytes of SHA-256 over tag and parts, each written as
// "<decimal byte length>:<bytes>", in lowercase hex. The length prefixes make the encoding of a
// tuple unambiguous.
func hash8(tag string, parts ...string) string {
	h := sha256.New()
	for _, p := range append([]string{tag}, parts...) {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}
