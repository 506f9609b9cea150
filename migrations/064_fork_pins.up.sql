-- Pinned reads (create_fork(..., pin_lakes => true), dataenv.repin_fork): for a fork and each of
-- its isolated lakes, the DuckLake snapshot of each ancestor namespace its deferred reads see.
-- One row per ancestor workspace of that namespace (a shared fork and its parent share one,
-- and both get a row with the same snapshot), so a row is found from the workspace a table is
-- deferred to. A sub-fork without pins of its own reads an ancestor namespace at the pin of the
-- nearest fork in its chain that has one. Rows go with the fork (ON DELETE CASCADE): only live
-- forks hold snapshots back from dataenv.maintain_lake.
CREATE TABLE dataenv.fork_lake_pins (
    fork        text NOT NULL REFERENCES dataenv.workspaces (id) ON DELETE CASCADE,
    lake        text NOT NULL,
    ancestor    text NOT NULL REFERENCES dataenv.workspaces (id) ON DELETE CASCADE,
    snapshot_id bigint NOT NULL CHECK (snapshot_id >= 0),
    pinned_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (fork, lake, ancestor),
    CHECK (fork <> ancestor)
);
CREATE INDEX fork_lake_pins_ancestor_idx ON dataenv.fork_lake_pins (ancestor, lake);
COMMENT ON TABLE dataenv.fork_lake_pins IS
    'The DuckLake snapshot of each ancestor namespace a pinned fork''s deferred reads of a lake see (create_fork pin_lakes, repin_fork); maintain_lake keeps these snapshots.';
REVOKE ALL ON dataenv.fork_lake_pins FROM PUBLIC;
