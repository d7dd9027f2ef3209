-- PostgreSQL versions of queries whose semantics need its locking.

-- name: run_claim
-- FOR UPDATE SKIP LOCKED: concurrent workers never wait on, or both take, the same run; the
-- outer status check re-runs against the committed row, so a run claimed meanwhile is skipped.
UPDATE runs
SET status = 'running', started_at = extract(epoch from clock_timestamp()),
    lease_until = extract(epoch from clock_timestamp()) + :lease_s,
    worker_id = :worker_id, attempts = attempts + 1
WHERE id = (
    SELECT r.id FROM runs r
    WHERE r.status = 'created'
      AND NOT EXISTS (SELECT 1 FROM runs b WHERE b.agent_id = r.agent_id AND b.status = 'running')
      -- the head of this agent's queue; a LIMIT subquery stays an index probe on
      -- (agent_id, status, created_at) whatever the planner's statistics say
      AND r.id = (
          SELECT e.id FROM runs e
          WHERE e.agent_id = r.agent_id AND e.status = 'created'
            -- not a run on a thread another run holds while it waits for a person
            AND NOT EXISTS (SELECT 1 FROM threads t
                            WHERE t.id = e.thread_id AND t.waiting_run_id <> e.id)
          ORDER BY e.created_at, e.id
          LIMIT 1)
    ORDER BY r.created_at, r.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
  AND status = 'created'
RETURNING id, agent_id, thread_id, request, attempts, trigger_message_id, channel_id, depth,
          created_at, started_at, trace_context;

-- name: notify_runs
SELECT pg_notify('agentrunner_runs', :agent_id);

-- name: run_finish
-- guarded: as in queries.sql, a run settles once, from `running`. The database's clock, as for
-- claims, so a run's end and the next claim compare truthfully even when workers' clocks differ.
UPDATE runs
SET status = :status, stop_reason = :stop_reason, model = :model, error_code = :error_code,
    error_message = :error_message, token_usage = :token_usage{json},
    cost_micros = :cost_micros, cost_known = :cost_known,
    completed_at = GREATEST(:now, extract(epoch from clock_timestamp()))
WHERE id = :id AND status = 'running';

-- name: thread_ids_starting
-- starts_with, not a range of the key: PostgreSQL orders text by the database's collation, in
-- which the ids beginning with a prefix need not sit together.
SELECT id FROM threads WHERE starts_with(id, :prefix) ORDER BY id LIMIT :limit;

-- name: run_ids_starting
SELECT id FROM runs WHERE starts_with(id, :prefix) ORDER BY id LIMIT :limit;

-- name: run_ids_ending
SELECT id FROM runs WHERE right(id, char_length(:suffix::text)) = :suffix ORDER BY id LIMIT :limit;

-- name: budget_lock
-- One hold at a time across every process: each checks sums over rows that others insert, so
-- a row lock would not serialise them. Taken in the hold's own transaction (released at its
-- end), before the statement whose snapshot must include every earlier hold.
SELECT pg_advisory_xact_lock(727274002);

-- name: changes_notify
-- What a commit changed (store/changes), for the processes tailing the store: sent when it
-- commits, one per transaction whatever the number of rows.
SELECT pg_notify('agentrunner_changes', :keys);

-- name: approval_ids_starting
SELECT id FROM approvals WHERE starts_with(id, :prefix) ORDER BY id LIMIT :limit;

-- name: database_connections
-- The database's connections now (this one left out) and the server's bound: `status`.
SELECT (SELECT count(*) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()) AS connections,
       current_setting('max_connections')::int AS max_connections;
