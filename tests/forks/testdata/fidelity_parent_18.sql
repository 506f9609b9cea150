-- Added to the fidelity fixture on PostgreSQL 18 and newer (same placeholders as
-- fidelity_parent.sql): what 18 adds to a table's definition. A virtual generated column, a CHECK
-- and a foreign key NOT ENFORCED, a named NOT NULL constraint NOT VALID, and a temporal primary
-- and foreign key (WITHOUT OVERLAPS, PERIOD; btree_gist is the fixture's).
SET ROLE {{app}};
CREATE TABLE app.rooms (
    id       int NOT NULL,
    valid_at daterange NOT NULL,
    price    numeric NOT NULL,
    with_tax numeric GENERATED ALWAYS AS (price * 1.2) VIRTUAL,
    label    text,
    PRIMARY KEY (id, valid_at WITHOUT OVERLAPS)
);
ALTER TABLE app.rooms ADD CONSTRAINT rooms_price_positive CHECK (price > 0) NOT ENFORCED;
INSERT INTO app.rooms (id, valid_at, price) VALUES (1, '[2026-01-01,2026-07-01)', 100), (1, '[2026-07-01,2027-01-01)', 120);
ALTER TABLE app.rooms ADD CONSTRAINT rooms_label_nn NOT NULL label NOT VALID;
CREATE TABLE app.stays (
    room     int NOT NULL,
    during   daterange NOT NULL,
    customer bigint REFERENCES app.customers (id) NOT ENFORCED,
    FOREIGN KEY (room, PERIOD during) REFERENCES app.rooms (id, PERIOD valid_at)
);
INSERT INTO app.stays VALUES (1, '[2026-02-01,2026-02-05)', 999);
RESET ROLE;
