-- Added to the fidelity fixture on PostgreSQL 17 and newer (same placeholders as
-- fidelity_parent.sql): the MAINTAIN privilege, new in 17, on a table and in default privileges.
SET ROLE {{app}};
GRANT MAINTAIN ON app.orders TO {{reader}};
ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT MAINTAIN ON TABLES TO {{owner2}};
CREATE TABLE app.maintained (id int PRIMARY KEY);
RESET ROLE;
