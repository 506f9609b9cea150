-- Spare copies of schema templates (issue 14): a schema_only fork of an unchanged parent takes
-- a TEMPLATE copy of the datatable's template made beforehand, in the background, instead of
-- copying the template while the user waits. A spare is a row of its own in the template's ledger
-- (so every path that drops a datatable entry's templates drops its spares too), naming the
-- template it copies in spare_of. taken: a fork is renaming it into its copy (the row goes once
-- the fork's copy is recorded; a row left taken by an interruption is cleaned up like any
-- template that is no longer current).
ALTER TABLE dataenv.schema_templates ADD COLUMN spare_of text;
ALTER TABLE dataenv.schema_templates ADD COLUMN taken_by_request uuid;
ALTER TABLE dataenv.schema_templates DROP CONSTRAINT schema_templates_state_check;
ALTER TABLE dataenv.schema_templates ADD CONSTRAINT schema_templates_state_check
    CHECK (state IN ('building', 'ready', 'taken'));
ALTER TABLE dataenv.schema_templates ADD CONSTRAINT schema_templates_taken_check
    CHECK ((state = 'taken') = (taken_by_request IS NOT NULL) AND (state <> 'taken' OR spare_of IS NOT NULL));
