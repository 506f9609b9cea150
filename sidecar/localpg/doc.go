// Package localpg starts PostgreSQL clusters from the machine's own binaries: throwaway clusters
// for tests (a temporary directory, fsync off, everything removed at Stop, and removed anyway if
// the process dies) and persistent clusters for `dataenv dev` / `make run` (a directory that is
// reused across runs).
//
// Every cluster has wal_level=logical, room for many replication slots and WAL senders, listens on
// 127.0.0.1 at a free (or chosen) port and puts its unix socket in a private directory. A
// superuser with a generated password (scram-sha-256) is created by initdb.
//
// initdb and postgres refuse to run as root. When the process runs as root, localpg runs them as
// Debian's `postgres` system user (or DATAENV_PG_USER) in directories chowned to that user.
//
// Binaries: Config.BinDir, else $DATAENV_PG_BINDIR, else the newest /usr/lib/postgresql/N/bin
// (N >= 15), else the directory initdb on PATH resolves to.
package localpg
