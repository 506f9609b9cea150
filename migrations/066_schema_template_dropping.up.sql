-- A schema template (or spare) being dropped (issue 14; found by make chaos): its ledger row is
-- marked dropping before its database is dropped, and deleted after. A drop interrupted between the
-- two left a ready row naming a database that was gone; when the parent's schema then returned to
-- that template's fingerprint (a grant given and taken back), every schema_only fork picked the
-- row and failed on the missing template. A dropping row is never used; the next refresh of its
-- entry finishes the drop.
ALTER TABLE dataenv.schema_templates DROP CONSTRAINT schema_templates_state_check;
ALTER TABLE dataenv.schema_templates ADD CONSTRAINT schema_templates_state_check
    CHECK (state IN ('building', 'ready', 'taken', 'dropping'));
