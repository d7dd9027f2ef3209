-- SQLite versions of queries that differ from queries.sql.

-- name: notify_runs
-- SQLite has no LISTEN/NOTIFY: idle workers poll (see agentrunner.worker).
SELECT :agent_id AS agent_id;
