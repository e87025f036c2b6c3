-- A program shaped like an embedded database: fill an in-memory table, index it, sort,
-- group, delete and update rows. Run by `cargo xtask programs` (the `sqlite` row); its
-- random values come from SQLite's own generator, so row contents differ run to run
-- but not their sizes' distribution, and the printed counts are fixed.
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150000)
INSERT INTO t SELECT i, hex(randomblob(abs(random()) % 40 + 4)), random() FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*) FROM (SELECT b FROM t ORDER BY c LIMIT 100000);
SELECT count(*) FROM (SELECT substr(b, 1, 2) k, count(*) FROM t GROUP BY k);
DELETE FROM t WHERE a % 3 = 0;
UPDATE t SET b = b || 'zz' WHERE a % 5 = 0;
SELECT count(*) FROM t;
