// Package lake is the lake side of dataenv: storages and lakes read from the control database,
// the one resolver every DuckDB job's ATTACH statements go through, the registry of fork lake
// namespaces (the cleanup ledger) and the fork hooks.
//
// # Resolution (Resolver.Resolve)
//
//	ATTACH 'ducklake://main' AS dl (opts)
//	  root / shared fork  → ATTACH 'ducklake:postgres:<path>' AS dl (<extra_args>, opts, DATA_PATH <storage>/<data_path>/
//	                                          [, META_SCHEMA <metadata schema, default public>], META_SECRET s)
//	  isolated fork       → registry row + marked schema, then
//	                        ATTACH ... AS dl (<extra_args − reserved>, opts − reserved,
//	                                          DATA_PATH <storage>/__dataenv_forks/<segment>/<data_path>/,
//	                                          METADATA_SCHEMA/META_SCHEMA dataenv_fork_<ws>_<lake>_<hash8>, META_SECRET s)
//	                        ATTACH IF NOT EXISTS ... AS __dataenv_dl_<lake>_<ancestor>_<hash8> (..., READ_ONLY [, SNAPSHOT_VERSION <pin>])   per ancestor namespace
//	                        BEGIN; CREATE [OR REPLACE] VIEW dl.<t> AS SELECT * FROM <nearest owner alias>.<t>; ...; COMMIT
//	ATTACH 'datatable://crm' AS crm (opts) → ATTACH '<path>' AS crm (TYPE postgres, opts, SECRET s)
//
// Every attach is made as the workspace's managed role on the catalog's (or datatable's) cluster
// (cluster.Locked.WorkspaceLibpq), after Access gave that role write on its own namespace and read
// on the ancestors' (or GrantDatatable, for a datatable). The resolved attaches run in the job's
// setup, before its own SQL, which the runner then sandboxes (protocol.Sandbox). Credentials
// never appear in an ATTACH path: each database gets a temporary DuckDB postgres secret, dropped
// once the attaches are done, each S3 storage a temporary S3 secret scoped to its url; errors and
// results are scrubbed of them anyway. No admin connection reads a table of a namespace: the live
// views and the commit check read as the workspace role; the admin's are catalog queries and
// dataenv's own DDL (marked schemas, grants). Reserved options
// (METADATA_SCHEMA, META_SCHEMA, DATA_PATH, OVERRIDE_DATA_PATH) are stripped in a fork because
// DuckDB keeps the last duplicate of an option.
//
// # Pins (dataenv.fork_lake_pins, pins.go)
//
// A pinned fork attaches an ancestor namespace at the pinned snapshot (its own pin, else the
// nearest pin of its chain), and its defer views cover only the tables the namespace had then.
// Resolver.PinFork takes pins (create_fork pin_lakes, repin_fork); Resolver.Maintain decides what
// maintain_lake expires. Both hold the namespace's lake_pins lock.
//
// # Registry rows (dataenv.fork_lake_namespaces)
//
// One row per physical location an isolated fork attached: (workspace, lake, metadata schema,
// catalog cluster and database, storage name and url, data prefix). No foreign key to the
// workspace. Lifecycle of a row:
//
//	registered (schema_dropped=false) ──DROP SCHEMA ok──► schema_dropped=true ──prefix deleted──► row deleted
//	      ▲                                   │ storage down: stays, last_error set; a later run retries the data phase only
//	      └──── a new attach resets schema_dropped (the attach recreates the schema) ──┘
//
// The row is written before the schema is created, and the schema only with dataenv's marker:
// a crash anywhere leaves nothing untracked, and cleanup never drops a schema it did not make.
// Cleanup reads the registered catalog and storage url, never the current settings.
//
// # Fork hooks
//
// A new fork gets copies of its parent's lake rows stamped isolated or shared
// (dataenv.stamp_fork_lakes, from an AFTER INSERT trigger on dataenv.workspaces). Hooks.CleanupFork is the workspaces area's ForkCleaner: drop_fork
// calls it once the workspace row is gone, create_fork before reusing an id (BlocksCreate: only a
// schema that cannot be dropped blocks). A workspace that exists is never cleaned.
package lake
