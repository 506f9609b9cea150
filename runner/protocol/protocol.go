// Package protocol is the wire format between the runner client and the dataenv-runner
// process: one Request as JSON on the runner's stdin, one Response as JSON in the result file.
// It is cgo-free.
//
// Credentials (S3 keys, catalog passwords) travel only inside Request.Blocks and Request.Args,
// that is on stdin: never in argv or in the runner's environment.
package protocol

import (
	"encoding/json"
	"time"
)

// Request modes.
const (
	// ModeRun runs Blocks and collects results.
	ModeRun = "run"
	// ModeInstall runs only [FORCE] INSTALL statements (the client builds them) into a
	// writable extension directory, outside any jail.
	ModeInstall = "install"
)

// What a preloading runner writes on its ready descriptor (--ready-fd): ReadyByte once DuckDB is
// open with the extensions loaded, then WrittenByte once the result file is whole, before the
// process exits (the client may read the result while the exit goes on).
const (
	ReadyByte   byte = '1'
	WrittenByte byte = 'd'
)

// MaxProbeBytes bounds the rows of a request's probes together (as JSON), apart from
// MaxResultBytes; a probe cut there says Truncated.
const MaxProbeBytes = 10 << 20

// DefaultMaxResultBytes bounds a result when the request does not.
const DefaultMaxResultBytes = 10 << 20

// Request is one job for the runner.
type Request struct {
	Mode string `json:"mode"`
	// Setup are SQL texts the job's owner (dataenv) runs before Blocks, on the same connection:
	// secrets, the attaches the job may use, their secrets' drop. Their rows are not collected;
	// a failure ends the job with ErrorBlock -1.
	Setup []string `json:"setup,omitempty"`
	// Probes are SQL texts the job's owner runs after Setup and before the sandbox and the first
	// block, whose rows come back in Response.Probes: what the attaches show before the job's
	// own SQL has run (so the job cannot have shaped it). A probe that fails says so in its
	// Result.Error; the job goes on.
	Probes []string `json:"probes,omitempty"`
	// Sandbox, when set, closes the door after Setup and before the first block (see Sandbox).
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Blocks are SQL texts run in order on one connection. A block may hold several
	// statements; the rows of its last statement are the block's result.
	Blocks []string `json:"blocks"`
	// Args are job arguments, set as DuckDB variables before the first block:
	// getvariable('name') reads them.
	Args map[string]json.RawMessage `json:"args,omitempty"`
	// MemoryLimit is DuckDB's memory_limit ("2GB"); empty keeps DuckDB's default.
	MemoryLimit string `json:"memory_limit,omitempty"`
	// Threads is DuckDB's threads setting; 0 keeps DuckDB's default.
	Threads int `json:"threads,omitempty"`
	// TempDirectory is where DuckDB spills.
	TempDirectory string `json:"temp_directory,omitempty"`
	// MaxTempDirectorySize is DuckDB's max_temp_directory_size ("10GiB"); empty keeps DuckDB's
	// default.
	MaxTempDirectorySize string `json:"max_temp_directory_size,omitempty"`
	// MaxResultBytes bounds the JSON of the collected rows; rows past it are dropped and the
	// result is marked truncated. 0 means DefaultMaxResultBytes.
	MaxResultBytes int64 `json:"max_result_bytes,omitempty"`
	// ResultPath is the file the runner writes its Response to.
	ResultPath string `json:"result_path"`
	// CollectLastOnly keeps only the last block's result.
	CollectLastOnly bool `json:"collect_last_only,omitempty"`
	// ExtensionDirectory is DuckDB's extension_directory.
	ExtensionDirectory string `json:"extension_directory,omitempty"`
	// TestHook makes the runner misbehave on purpose; honoured only by a runner built with the dataenv_testhooks tag.
	TestHook *TestHook `json:"test_hook,omitempty"`
}

// Sandbox is what a job's own SQL (Blocks) may still reach once Setup has run. The runner then
// sets, in this order: autoinstall_known_extensions = false, allow_community_extensions =
// false, s3_url_compatibility_mode = true (when httpfs is loaded: no globs or ?s3_endpoint=
// query parameters in s3:// URLs, so a secret cannot be sent to another endpoint),
// allowed_directories and allowed_paths, enable_external_access = false (no new ATTACH of a
// file or a Postgres database, no file or URL outside the allowed ones, no extension loaded
// from a path), allowed_configs and, last, lock_configuration = true (none of it can be undone
// by the job's SQL). What each setting does and does not enforce is in runner/README.md.
type Sandbox struct {
	// AllowedDirectories are the directories and URL prefixes (s3://bucket/prefix/) the job may
	// read and write: the data paths of its lakes. The temporary directory is allowed by DuckDB
	// itself.
	AllowedDirectories []string `json:"allowed_directories,omitempty"`
	// AllowedPaths are single files the job may read and write.
	AllowedPaths []string `json:"allowed_paths,omitempty"`
}

// TestHook describes a failure to inject after a given block has run.
type TestHook struct {
	// AfterBlock is the number of blocks to run before the hook fires.
	AfterBlock int `json:"after_block"`
	// Crash "SIGSEGV" makes a real segmentation fault in native code. (A SIGKILL is best sent
	// from outside, as the OOM killer does: a runner that is PID 1 of its namespace ignores
	// one it sends itself.)
	Crash string `json:"crash,omitempty"`
	// SymlinkResultTo replaces the result file by a symlink to this path.
	SymlinkResultTo string `json:"symlink_result_to,omitempty"`
	// Print writes this many bytes to stdout and to stderr.
	Print int64 `json:"print,omitempty"`
	// ExitDelayMS keeps the runner this many milliseconds between its result and its exit.
	ExitDelayMS int `json:"exit_delay_ms,omitempty"`
}

// Response is what the runner writes to Request.ResultPath.
type Response struct {
	Results []Result `json:"results"`
	// Probes holds one result per Request.Probes entry.
	Probes []Result `json:"probes,omitempty"`
	// Error is set when a block failed; ErrorBlock is its index.
	Error      string `json:"error,omitempty"`
	ErrorBlock int    `json:"error_block,omitempty"`
	// Phases is how long the runner spent on each part of the job, up to where it ended.
	Phases Phases `json:"phases"`
}

// Phases are the parts of a job in the runner, in the order they run. The process's start and
// DuckDB's open are not among them: a spare runner has done those before its job arrives.
type Phases struct {
	// Settings is the job's limits and arguments made DuckDB settings and variables.
	Settings time.Duration `json:"settings"`
	// Setup is the Setup statements: dataenv's attaches and secrets.
	Setup time.Duration `json:"setup"`
	// Probes is the Probes statements.
	Probes time.Duration `json:"probes"`
	// Sandbox is closing DuckDB's door on the job's SQL.
	Sandbox time.Duration `json:"sandbox"`
	// Blocks is the job's own SQL, its rows collected.
	Blocks time.Duration `json:"blocks"`
}

// Result is the outcome of one block: column names and types in the statement's order and rows
// as arrays in that order (a JSON object, and jsonb even more so, would lose the order).
type Result struct {
	Block     int                 `json:"block"`
	Columns   []Column            `json:"columns"`
	Rows      [][]json.RawMessage `json:"rows"`
	Truncated bool                `json:"truncated,omitempty"`
	// Error is set on a probe that failed (a probe's failure is the probe's alone: the job
	// goes on; a block's ends the job instead, in Response.Error).
	Error string `json:"error,omitempty"`
}

// Column names one result column.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}
