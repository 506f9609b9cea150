-- The foreign key from requests.kind to request_kinds took a KEY SHARE row lock on the kind's
-- row in every inserting transaction; with concurrent inserters of one kind (every ping) each of
-- them turned that row's lock into a new multixact, about a sixth of the cost of an insert. The
-- BEFORE INSERT trigger already refuses unknown kinds (dataenv.validate_request), and dataenv
-- never deletes a kind.
ALTER TABLE dataenv.requests DROP CONSTRAINT IF EXISTS requests_kind_fkey;
