-- dataenv quickstart: a workspace with a Postgres database and a DuckLake lake, a fork of it, a
-- DuckDB job and materializations, then the teardown.
--
-- Run it against `make run` (dataenv dev), from the repository root, with the command the banner
-- prints:
--
--     psql '<the DSN dataenv dev prints>' -f examples/quickstart.sql
--
-- dataenv dev has prepared what it needs: the built-in cluster `instance` (set up), a database
-- `lake_catalog` on it for lake catalogs, and a storage `local` (a directory of the instance).
-- Every request is waited for with dataenv.wait and shows `status, error, result`; `error` says
-- what to do when a request fails. The script cleans up after itself, so it can run again.

\set ON_ERROR_STOP on

-- 1. A Postgres database with sample data: three customers.
SELECT dataenv.create_database('instance', 'crm') AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');

\connect crm
-- as the application role, which owns the databases dataenv creates (jobs and forks see what it may)
SET ROLE dataenv_app;
CREATE TABLE customers (customer_id integer PRIMARY KEY, name text NOT NULL, country text NOT NULL);
INSERT INTO customers VALUES (1, 'Ada', 'UK'), (2, 'Grace', 'US'), (3, 'Edsger', 'NL');
\connect dataenv

-- 2. A workspace: the database as its datatable `crm`, and a lake `main`.
SELECT dataenv.create_workspace('shop');
SELECT dataenv.add_datatable('shop', 'crm', 'instance', 'crm');
-- add_lake checks what it can at once (the catalog database exists and is no other lake's) and
-- returns a check request: the sidecar connects to the catalog and the storage.
SELECT dataenv.add_lake('shop', 'main', 'instance', 'lake_catalog', 'local', 'shop/main') AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');

-- 3. Materialize: 300 orders of those customers into the lake table main.orders.
SELECT dataenv.materialize('shop', 'ducklake://main/orders', $$
  SELECT range AS order_id, range % 3 + 1 AS customer_id, (range % 7 + 1) * 10 AS amount
    FROM range(300)
$$) AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');

-- 4. A job: DuckDB joins the lake with the Postgres datatable (100 orders per customer).
SELECT dataenv.run('shop', $$
  ATTACH 'ducklake://main' AS dl;
  ATTACH 'datatable://crm' AS crm (READ_ONLY);
  SELECT c.name, count(*) AS orders, sum(o.amount) AS revenue
    FROM dl.orders o JOIN crm.public.customers c USING (customer_id)
   GROUP BY c.name ORDER BY c.name
$$) AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');

-- 5. A fork: crm copied with its rows (full_copy), the lake isolated: the fork writes its own
--    tables and reads the others from shop (deferred).
SELECT dataenv.create_fork('shop', 'shop/dev', '{"crm": "full_copy"}') AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '5 min');
SELECT cluster, database, resolved_from, mode FROM dataenv.resolve_datatable('shop/dev', 'crm');
SELECT table_name, state, from_workspace FROM dataenv.fork_materialization WHERE workspace = 'shop/dev';

-- A new customer in the fork's copy of crm (shop's database does not change).
SELECT database AS fork_crm FROM dataenv.resolve_datatable('shop/dev', 'crm') \gset
\connect :fork_crm
INSERT INTO customers VALUES (4, 'Barbara', 'US');
\connect dataenv

-- 6. Append 20 orders of the new customer in the fork. orders is deferred (the fork reads
--    shop's), so the fork's own table starts from shop's 300 rows (seed_from_parent => true,
--    the default for append): 320 rows.
SELECT dataenv.materialize('shop/dev', 'ducklake://main/orders', $$
  SELECT 1000 + range AS order_id, 4 AS customer_id, 25 AS amount FROM range(20)
$$, strategy => 'append') AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');
SELECT table_name, state, from_workspace FROM dataenv.fork_materialization WHERE workspace = 'shop/dev';

-- 7. A derived table in the fork, from the lake and the fork's crm: revenue per country.
SELECT dataenv.materialize('shop/dev', 'ducklake://main/revenue_by_country', $$
  ATTACH 'ducklake://main' AS dl;
  ATTACH 'datatable://crm' AS crm (READ_ONLY);
  SELECT c.country, count(*) AS orders, sum(o.amount) AS revenue
    FROM dl.orders o JOIN crm.public.customers c USING (customer_id)
   GROUP BY c.country
$$) AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');

SELECT dataenv.run('shop/dev', $$
  ATTACH 'ducklake://main' AS dl;
  SELECT country, orders, revenue FROM dl.revenue_by_country ORDER BY country
$$) AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');

-- shop is unchanged: 300 orders, three customers, no revenue_by_country.
SELECT dataenv.run('shop', $$
  ATTACH 'ducklake://main' AS dl;
  ATTACH 'datatable://crm' AS crm (READ_ONLY);
  SELECT (SELECT count(*) FROM dl.orders) AS orders, (SELECT count(*) FROM crm.public.customers) AS customers
$$) AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');

-- 8. Teardown, in the order that works: forks first (their copies and lake namespaces go with
--    them), then the workspace (its datatable and lake entries), then the database.
SELECT dataenv.drop_fork('shop/dev') AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');
SELECT dataenv.drop_workspace('shop');
SELECT dataenv.drop_database('instance', 'crm') AS id \gset
SELECT status, error, result FROM dataenv.wait(:'id', '2 min');
