-- The fidelity fixture: one object of each kind a fork must reproduce, run by the test as the
-- cluster's superuser in a parent database owned by the application role. Placeholders (quoted
-- identifiers, replaced by the test): {{db}} the parent database, {{app}} the application role
-- (the parent's owner), {{owner2}} a datatable role that owns some objects, {{other}} a datatable
-- role that owns nothing but has default privileges of its own, {{reader}} a datatable role that
-- is only granted things. Rows are inserted at the end (the test compares them for full_copy).

-- Settings and the database ACL: a fork keeps them and never widens access.
SET ROLE {{app}};
ALTER DATABASE {{db}} SET search_path = app, public;
ALTER DATABASE {{db}} SET work_mem = '8MB';
ALTER DATABASE {{db}} SET statement_timeout = '30s';
REVOKE CONNECT, TEMPORARY ON DATABASE {{db}} FROM PUBLIC;
GRANT CONNECT ON DATABASE {{db}} TO {{reader}};
RESET ROLE;
ALTER ROLE {{reader}} IN DATABASE {{db}} SET work_mem = '16MB';
ALTER ROLE {{app}} IN DATABASE {{db}} SET lock_timeout = '5s';

SET ROLE {{app}};
-- Extensions (trusted: the database owner may create them).
CREATE EXTENSION citext SCHEMA public;
CREATE EXTENSION btree_gist SCHEMA public;

CREATE SCHEMA app;
COMMENT ON SCHEMA app IS 'the application''s schema';
GRANT USAGE ON SCHEMA app TO {{reader}};
GRANT USAGE, CREATE ON SCHEMA app TO {{owner2}};

-- Default privileges: the owner's, in a schema and global, and another role's.
ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO {{reader}};
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE {{other}} IN SCHEMA app GRANT SELECT, INSERT ON TABLES TO {{reader}};
ALTER DEFAULT PRIVILEGES FOR ROLE {{other}} GRANT USAGE ON SEQUENCES TO {{reader}};

-- Types: a non-deterministic collation, a domain, an enum, a range, a composite.
CREATE COLLATION app.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
COMMENT ON COLLATION app.ci IS 'case-insensitive';
CREATE DOMAIN app.email AS public.citext CHECK (VALUE ~ '^[^@]+@[^@]+$');
COMMENT ON DOMAIN app.email IS 'an e-mail address';
CREATE TYPE app.status AS ENUM ('new', 'paid', 'shipped');
REVOKE USAGE ON TYPE app.status FROM PUBLIC;
GRANT USAGE ON TYPE app.status TO {{reader}};
CREATE TYPE app.price_range AS RANGE (subtype = numeric);
CREATE TYPE app.address AS (street text, city text);

-- Full-text search: a configuration and a dictionary of our own.
CREATE TEXT SEARCH DICTIONARY app.simple_dict (TEMPLATE = pg_catalog.simple, STOPWORDS = english);
CREATE TEXT SEARCH CONFIGURATION app.english_simple (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION app.english_simple ALTER MAPPING FOR asciiword WITH app.simple_dict;

-- Tables: identity and generated columns, column grants, a sequence of its own.
CREATE SEQUENCE app.invoice_no START 1000;
CREATE TABLE app.customers (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email      app.email NOT NULL UNIQUE,
    name       text COLLATE app.ci NOT NULL,
    secret     text,
    address    app.address,
    name_upper text GENERATED ALWAYS AS (upper(name)) STORED,
    search     tsvector GENERATED ALWAYS AS (to_tsvector('app.english_simple'::regconfig, name)) STORED
);
COMMENT ON TABLE app.customers IS 'who buys';
COMMENT ON COLUMN app.customers.secret IS 'never shown to the reader';
CREATE INDEX customers_search_idx ON app.customers USING gin (search);
REVOKE SELECT ON app.customers FROM {{reader}};
GRANT SELECT (id, email, name), UPDATE (name) ON app.customers TO {{reader}};

CREATE TABLE app.orders (
    id          bigserial PRIMARY KEY,
    customer_id bigint NOT NULL REFERENCES app.customers (id) ON DELETE CASCADE,
    status      app.status NOT NULL DEFAULT 'new',
    amount      numeric(12,2) NOT NULL CHECK (amount >= 0),
    invoice     bigint DEFAULT nextval('app.invoice_no'),
    placed_at   timestamptz NOT NULL DEFAULT '2026-01-01 00:00:00+00',
    updated_at  timestamptz
);
CREATE INDEX orders_customer_idx ON app.orders (customer_id, placed_at DESC);
COMMENT ON INDEX app.orders_customer_idx IS 'orders of a customer, newest first';
CREATE STATISTICS app.orders_stats (dependencies, ndistinct) ON customer_id, status FROM app.orders;
GRANT SELECT, INSERT ON app.orders TO {{reader}};
GRANT USAGE ON SEQUENCE app.orders_id_seq TO {{reader}};

-- Functions: SQL, plpgsql, SECURITY DEFINER with a pinned search_path, a procedure, a trigger.
CREATE FUNCTION app.order_total(customer bigint) RETURNS numeric
    LANGUAGE sql STABLE AS $$ SELECT coalesce(sum(amount), 0) FROM app.orders WHERE customer_id = customer $$;
COMMENT ON FUNCTION app.order_total(bigint) IS 'what a customer spent';
CREATE FUNCTION app.place_order(customer bigint, amount numeric) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, app AS $$
DECLARE id bigint;
BEGIN
    INSERT INTO app.orders (customer_id, amount) VALUES (customer, amount) RETURNING orders.id INTO id;
    RETURN id;
END $$;
GRANT EXECUTE ON FUNCTION app.place_order(bigint, numeric) TO {{reader}};
CREATE PROCEDURE app.mark_paid(order_id bigint) LANGUAGE sql AS $$ UPDATE app.orders SET status = 'paid' WHERE id = order_id $$;
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$;
CREATE TRIGGER orders_touch BEFORE UPDATE ON app.orders FOR EACH ROW EXECUTE FUNCTION app.touch();
COMMENT ON TRIGGER orders_touch ON app.orders IS 'keeps updated_at';

-- An aggregate (its pg_proc row is in language internal, like every aggregate's) and a view
-- that calls it: a restore that leaves the aggregate out fails on the view.
CREATE FUNCTION app.concat_step(acc text, item text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN acc IS NULL THEN item ELSE acc || ', ' || item END $$;
CREATE AGGREGATE app.concat_all(text) (SFUNC = app.concat_step, STYPE = text);
CREATE VIEW app.order_statuses AS
    SELECT customer_id, app.concat_all(status::text ORDER BY id) AS statuses FROM app.orders GROUP BY customer_id;

-- Views: a security-barrier view with a check option, a materialized view.
CREATE VIEW app.paid_orders WITH (security_barrier) AS
    SELECT id, customer_id, amount FROM app.orders WHERE status = 'paid' WITH CHECK OPTION;
GRANT SELECT ON app.paid_orders TO {{reader}};
CREATE MATERIALIZED VIEW app.customer_totals AS
    SELECT customer_id, sum(amount) AS total, count(*) AS n FROM app.orders GROUP BY customer_id WITH NO DATA;
CREATE UNIQUE INDEX customer_totals_pk ON app.customer_totals (customer_id);

-- Row-level security, enabled and forced, with a permissive and a restrictive policy.
CREATE TABLE app.notes (
    id     int PRIMARY KEY,
    tenant text NOT NULL,
    body   text NOT NULL,
    hidden boolean NOT NULL DEFAULT false
);
INSERT INTO app.notes VALUES (1, 't1', 'first', false), (2, 't1', 'hidden', true), (3, 't2', 'other tenant', false);
ALTER TABLE app.notes ENABLE ROW LEVEL SECURITY;
ALTER TABLE app.notes FORCE ROW LEVEL SECURITY;
CREATE POLICY notes_tenant ON app.notes USING (tenant = current_setting('app.tenant', true));
CREATE POLICY notes_visible ON app.notes AS RESTRICTIVE USING (NOT hidden);
CREATE POLICY notes_reader ON app.notes FOR SELECT TO {{reader}} USING (true);
COMMENT ON POLICY notes_visible ON app.notes IS 'hidden notes are never shown';
GRANT SELECT ON app.notes TO {{reader}};

-- Partitions, an exclusion constraint, a rule, an unlogged table.
CREATE TABLE app.events (id bigint NOT NULL, at timestamptz NOT NULL, payload jsonb) PARTITION BY RANGE (at);
CREATE TABLE app.events_2025 PARTITION OF app.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE app.events_rest PARTITION OF app.events DEFAULT;
CREATE INDEX events_at_idx ON app.events (at);
CREATE TABLE app.bookings (
    room   int NOT NULL,
    during tstzrange NOT NULL,
    price  app.price_range,
    EXCLUDE USING gist (room WITH =, during WITH &&)
);
CREATE TABLE app.archive (id bigint PRIMARY KEY, body text);
CREATE RULE archive_keep AS ON DELETE TO app.archive DO INSTEAD NOTHING;
CREATE UNLOGGED TABLE app.sessions (token text PRIMARY KEY, customer_id bigint);

-- A publication of some tables (the owner of the tables may create it).
CREATE PUBLICATION app_pub FOR TABLE app.orders, app.customers WITH (publish = 'insert, update');

-- A large object with a comment and a grant.
SELECT lo_from_bytea(424242, '\xdeadbeef'::bytea);
COMMENT ON LARGE OBJECT 424242 IS 'a blob';
GRANT SELECT ON LARGE OBJECT 424242 TO {{reader}};
RESET ROLE;

-- Objects of another owner: a table (granted to the application role and the reader) and a
-- partition.
SET ROLE {{owner2}};
CREATE TABLE app.audit (id bigserial PRIMARY KEY, what text NOT NULL);
GRANT SELECT ON app.audit TO {{app}}, {{reader}};
RESET ROLE;
SET ROLE {{app}};
CREATE TABLE app.events_2026 PARTITION OF app.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
ALTER TABLE app.events_2026 OWNER TO {{owner2}};
RESET ROLE;

-- Rows.
SET ROLE {{app}};
INSERT INTO app.customers (email, name, secret, address)
SELECT 'c' || g || '@example.com', 'Customer ' || g, 'secret ' || g, ROW('street ' || g, 'city')::app.address
  FROM generate_series(1, 20) g;
INSERT INTO app.orders (customer_id, amount, status)
SELECT 1 + g % 20, g * 1.5, (ARRAY['new', 'paid', 'shipped']::app.status[])[1 + g % 3] FROM generate_series(1, 60) g;
SELECT nextval('app.invoice_no') FROM generate_series(1, 5);
REFRESH MATERIALIZED VIEW app.customer_totals;
INSERT INTO app.events VALUES (1, '2025-06-01', '{"a": 1}'), (2, '2026-06-01', '{"b": 2}'), (3, '2030-01-01', NULL);
INSERT INTO app.bookings VALUES (1, tstzrange('2026-01-01', '2026-01-02'), '[10,20)');
INSERT INTO app.archive VALUES (1, 'kept');
INSERT INTO app.sessions VALUES ('tok', 1);
RESET ROLE;
SET ROLE {{owner2}};
INSERT INTO app.audit (what) VALUES ('created'), ('checked');
RESET ROLE;
