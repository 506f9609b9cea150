-- Fork copies made by a reflink clone: CREATE DATABASE ... TEMPLATE parent STRATEGY FILE_COPY
-- with file_copy_method = clone (PostgreSQL 18+, a data directory on Btrfs or XFS with reflink).
ALTER TABLE dataenv.fork_copies DROP CONSTRAINT fork_copies_method_check;
ALTER TABLE dataenv.fork_copies ADD CONSTRAINT fork_copies_method_check
    CHECK (method IN ('template', 'clone', 'dump'));
