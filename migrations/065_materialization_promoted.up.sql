-- A materialization written by dataenv.promote (sqlapi/065_promote.sql): the fork whose version
-- of the table it copied into this workspace's namespace. NULL for every other record.
ALTER TABLE dataenv.materializations ADD COLUMN promoted_from text;
