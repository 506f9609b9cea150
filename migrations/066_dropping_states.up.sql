-- Ledger rows of databases being dropped (issue 14; both found by make chaos). A schema template
-- (or spare) row and a fork copy row are marked dropping before their database is dropped, and
-- deleted after: a drop interrupted between the two must not leave a row that says ready for a
-- database that is gone.
--
-- - A schema template: when the parent's schema returned to a dropped template's fingerprint (a
--   grant given and taken back), every schema_only fork picked the row and failed on the missing
--   template. A dropping row is never used; the next refresh of its entry finishes the drop.
-- - A fork copy: a create_fork whose rollback dropped its copy and then lost its connection ran
--   again, found its own ready row, kept it as done and succeeded without the copy. A dropping
--   row of the request is an interrupted attempt: dropped (what is left of it) and made again.
ALTER TABLE dataenv.schema_templates DROP CONSTRAINT schema_templates_state_check;
ALTER TABLE dataenv.schema_templates ADD CONSTRAINT schema_templates_state_check
    CHECK (state IN ('building', 'ready', 'taken', 'dropping'));
ALTER TABLE dataenv.fork_copies DROP CONSTRAINT fork_copies_state_check;
ALTER TABLE dataenv.fork_copies ADD CONSTRAINT fork_copies_state_check
    CHECK (state IN ('creating', 'ready', 'dropping'));
