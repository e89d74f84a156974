-- SQLite's search index gained scope and filter tokens in 0013; the
-- PostgreSQL index (0012) already filters by column, so nothing changes here.
SELECT 1;
