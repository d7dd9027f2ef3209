-- Every query of the store, by name. Placeholders are :name; {json} marks a JSON cast
-- (nothing on SQLite, ::jsonb on PostgreSQL). A block in postgres.sql or sqlite.sql with the
-- same name replaces the one here for that dialect.

-- name: thread_get
SELECT id, agent_id, title, session_run_id, session_state, active_task, parent_thread_id,
       message_count, created_at, updated_at, summary_through, waiting_run_id,
       forked_from, forked_at
FROM threads WHERE id = :id;

-- name: thread_ids_starting
-- The ids that begin with :prefix, for short ids typed at the CLI: a range of the key, which
-- SQLite orders by code point.
SELECT id FROM threads WHERE id >= :prefix AND id < :prefix || char(1114111)
ORDER BY id LIMIT :limit;

-- name: thread_create
INSERT INTO threads (id, agent_id, title, session_state, parent_thread_id, message_count,
                     created_at, updated_at)
VALUES (:id, :agent_id, NULL, :session_state{json}, :parent_thread_id, 0, :now, :now)
ON CONFLICT (id) DO NOTHING;

-- name: thread_create_new
-- guarded: a thread opened with a history of its own is opened once: a batch that would add
-- that history to a thread someone opened meanwhile is refused whole.
INSERT INTO threads (id, agent_id, title, session_state, parent_thread_id, message_count,
                     created_at, updated_at)
VALUES (:id, :agent_id, NULL, :session_state{json}, NULL, :message_count, :now, :now)
ON CONFLICT (id) DO NOTHING;

-- name: thread_list
SELECT id, agent_id, title, session_run_id, session_state, active_task, parent_thread_id,
       message_count, created_at, updated_at, summary_through, waiting_run_id,
       forked_from, forked_at
FROM threads
WHERE updated_at < :before
ORDER BY updated_at DESC LIMIT :limit;

-- name: thread_list_agent_recent
-- One agent's threads among the :scan most recently updated of all, from threads_updated: the
-- whole answer for an agent in use, at a bounded cost whatever the project's size.
SELECT *
FROM (SELECT id, agent_id, title, session_run_id, session_state, active_task, parent_thread_id,
             message_count, created_at, updated_at, summary_through, waiting_run_id,
       forked_from, forked_at
      FROM threads
      WHERE updated_at < :before
      ORDER BY updated_at DESC LIMIT :scan) AS recent
WHERE agent_id = :agent_id
ORDER BY updated_at DESC LIMIT :limit;

-- name: thread_list_agent
-- All of one agent's threads from threads_agent, sorted: for an agent with too few among the
-- recent ones, this costs its own threads, not everyone's. (The unary plus keeps the planner
-- off threads_updated, which would walk every other agent's threads too.)
SELECT id, agent_id, title, session_run_id, session_state, active_task, parent_thread_id,
       message_count, created_at, updated_at, summary_through, waiting_run_id,
       forked_from, forked_at
FROM threads
WHERE agent_id = :agent_id AND +updated_at < :before
ORDER BY +updated_at DESC LIMIT :limit;

-- name: thread_set_task
-- A thread's current task, as its agent set it (set_task); NULL clears it.
UPDATE threads SET active_task = :task WHERE id = :id;

-- name: thread_set_title
UPDATE threads SET title = :title WHERE id = :id AND title IS NULL;

-- name: thread_manifest
-- The count is absolute (messages are numbered 1..n), so a run that died before its end
-- leaves a count the next run puts right.
UPDATE threads
SET message_count = :message_count, updated_at = :now,
    session_run_id = COALESCE(:session_run_id, session_run_id)
WHERE id = :id;

-- name: message_insert
INSERT INTO messages (thread_id, seq, role, body, run_id, created_at)
VALUES (:thread_id, :seq, :role, :body{json}, :run_id, :now);

-- name: message_insert_opening
-- A new thread's history, written with its guarded thread_create_new: where another request
-- opened the thread first, that batch is refused whole, and these rows must not fail it first.
INSERT INTO messages (thread_id, seq, role, body, run_id, created_at)
VALUES (:thread_id, :seq, :role, :body{json}, NULL, :now)
ON CONFLICT (thread_id, seq) DO NOTHING;

-- name: message_body_update
-- A message rewritten in place: a person's message marked unsent when its run ended before
-- any model request (engine.history leaves it out of what models are sent).
UPDATE messages SET body = :body{json} WHERE thread_id = :thread_id AND seq = :seq;

-- name: messages_recent
-- The newest messages after :after (a thread's summary point: 0 without one).
SELECT seq, body FROM messages WHERE thread_id = :thread_id AND seq > :after
ORDER BY seq DESC LIMIT :limit;

-- name: messages_before
-- The page of older messages before :before, for a history that reaches further back.
SELECT seq, body FROM messages WHERE thread_id = :thread_id AND seq > :after AND seq < :before
ORDER BY seq DESC LIMIT :limit;

-- name: thread_summary_insert
INSERT INTO thread_summaries (thread_id, through_seq, summary, model, run_id, requests,
                              cost_micros, created_at)
VALUES (:thread_id, :through_seq, :summary, :model, :run_id, :requests, :cost_micros, :now);

-- name: thread_summary_point
-- A summary's messages are the thread's, numbered 1..n: one never goes back.
UPDATE threads SET summary_through = :through_seq
WHERE id = :thread_id AND summary_through < :through_seq;

-- name: thread_summary_latest
SELECT thread_id, through_seq, summary, model, run_id, requests, cost_micros, created_at
FROM thread_summaries WHERE thread_id = :thread_id
ORDER BY through_seq DESC LIMIT 1;

-- name: messages_page
SELECT seq, body, run_id, created_at FROM messages WHERE thread_id = :thread_id AND seq > :after
ORDER BY seq LIMIT :limit;

-- name: messages_page_before
-- The page of a thread's messages before :before, newest first (the caller turns it round):
-- what a person reading the thread sees last, at the cost of the page, not of the thread.
SELECT seq, body, run_id, created_at FROM messages WHERE thread_id = :thread_id AND seq < :before
ORDER BY seq DESC LIMIT :limit;

-- name: run_insert
-- A run that begins as it is inserted (`running`, under its thread's lock) takes its place in
-- the thread's order (migration 18); a queued one takes it as it begins (run_begin).
INSERT INTO runs (id, agent_id, thread_id, parent_run_id, status, trigger_message_id,
                  channel_id, dm_conversation_id, request, depth, created_at, started_at, trace_id,
                  thread_order)
VALUES (:id, :agent_id, :thread_id, :parent_run_id, :status, :trigger_message_id,
        :channel_id, :dm_conversation_id, :request{json}, :depth, :now, :started_at, :trace_id,
        CASE WHEN :status = 'running' THEN
            (SELECT COALESCE(MAX(thread_order), 0) + 1 FROM runs WHERE thread_id = :thread_id)
        END);

-- name: run_begin
-- A queued run begins, holding its thread's lock: its place in the thread's order, and its
-- trace id, known once a worker runs it (NULL: telemetry off, the row's own kept).
UPDATE runs
SET thread_order = CASE WHEN thread_id IS NULL THEN NULL ELSE
        (SELECT COALESCE(MAX(r.thread_order), 0) + 1 FROM runs r WHERE r.thread_id = runs.thread_id)
    END,
    trace_id = COALESCE(:trace_id, trace_id)
WHERE id = :id;

-- name: run_finish
-- guarded: a run settles once, from `running`. A run the lease rules failed while its worker
-- was paused stays failed: the late worker's settle changes no row, and the driver refuses
-- the batch that carried it (the guard is this WHERE clause, not another statement).
UPDATE runs
SET status = :status, stop_reason = :stop_reason, model = :model, error_code = :error_code,
    error_message = :error_message, token_usage = :token_usage{json},
    cost_micros = :cost_micros, cost_known = :cost_known, completed_at = :now
WHERE id = :id AND status = 'running';

-- name: run_abandon
-- The runs that died holding the thread: each wrote messages past the count its thread's last
-- finished run left (a run's first write carries its user message). Runs merely waiting for
-- the thread (claimed from a mailbox, `running`) wrote none and are left alone. The walk is
-- over those few messages, never over the thread's earlier runs (a long-lived session has
-- thousands; walking them made a turn 13x slower).
UPDATE runs
SET status = 'failed', stop_reason = 'error', error_code = 'internal',
    error_message = 'the process running it stopped before it finished', completed_at = :now
WHERE id IN (SELECT run_id FROM messages WHERE thread_id = :thread_id AND seq > :after)
  AND status = 'running' AND id <> :run_id;

-- name: run_stop_reason
UPDATE runs SET stop_reason = :stop_reason WHERE id = :id;

-- name: run_get
SELECT id, agent_id, thread_id, parent_run_id, status, stop_reason, trigger_message_id,
       channel_id, dm_conversation_id, request, model, error_code, error_message,
       token_usage, cost_micros, cost_known, depth, created_at, started_at, completed_at,
       worker_id, attempts, trace_id, pruned
FROM runs WHERE id = :id;

-- name: run_ids_starting
SELECT id FROM runs WHERE id >= :prefix AND id < :prefix || char(1114111)
ORDER BY id LIMIT :limit;

-- name: run_ids_ending
-- The ids that end with :suffix, for the short ids pages show (ids.short_id): a scan, made
-- only when no id is or begins with what was typed.
SELECT id FROM runs WHERE substr(id, -length(:suffix)) = :suffix ORDER BY id LIMIT :limit;

-- name: run_list_thread
SELECT id, agent_id, thread_id, parent_run_id, status, stop_reason, trigger_message_id,
       channel_id, dm_conversation_id, request, model, error_code, error_message,
       token_usage, cost_micros, cost_known, depth, created_at, started_at, completed_at,
       worker_id, attempts, trace_id
FROM runs
WHERE thread_id = :thread_id AND created_at < :before
  AND (CAST(:agent_id AS TEXT) IS NULL OR agent_id = :agent_id)
ORDER BY created_at DESC LIMIT :limit;

-- name: run_list_status
-- One status's newest runs, from (status, created_at): listings merge the five statuses, so
-- they cost the page asked for, where one ORDER BY read every run the project ever had.
SELECT id, agent_id, thread_id, parent_run_id, status, stop_reason, trigger_message_id,
       channel_id, dm_conversation_id, request, model, error_code, error_message,
       token_usage, cost_micros, cost_known, depth, created_at, started_at, completed_at,
       worker_id, attempts, trace_id
FROM runs
WHERE status = :status AND created_at < :before
ORDER BY created_at DESC LIMIT :limit;

-- name: run_list_agent_status
-- The same for one agent, from (agent_id, status, created_at).
SELECT id, agent_id, thread_id, parent_run_id, status, stop_reason, trigger_message_id,
       channel_id, dm_conversation_id, request, model, error_code, error_message,
       token_usage, cost_micros, cost_known, depth, created_at, started_at, completed_at,
       worker_id, attempts, trace_id
FROM runs
WHERE agent_id = :agent_id AND status = :status AND created_at < :before
ORDER BY created_at DESC LIMIT :limit;

-- name: step_insert
-- A step that ends before its row is written is written once, already finished.
INSERT INTO run_steps (id, run_id, step_number, status, model_id, token_usage, cost_micros,
                       attempts, created_at, completed_at)
VALUES (:id, :run_id, :step_number, :status, :model_id, :token_usage{json}, :cost_micros,
        :attempts{json}, :now, :completed_at);

-- name: step_finish
UPDATE run_steps
SET status = :status, model_id = :model_id, token_usage = :token_usage{json},
    cost_micros = :cost_micros, attempts = :attempts{json}, completed_at = :now
WHERE run_id = :run_id AND id = :id;

-- name: step_list
SELECT id, run_id, step_number, status, model_id, token_usage, cost_micros, attempts,
       created_at, completed_at
FROM run_steps WHERE run_id = :run_id ORDER BY step_number, id;

-- name: run_message_insert
INSERT INTO run_messages (id, run_id, step_id, message_type, content, tool_name, tool_input,
                          tool_call_id, is_error, created_at)
VALUES (:id, :run_id, :step_id, :message_type, :content, :tool_name, :tool_input{json},
        :tool_call_id, :is_error, :now);

-- name: run_message_list
SELECT id, run_id, step_id, message_type, content, tool_name, tool_input, tool_call_id,
       is_error, created_at
FROM run_messages WHERE run_id = :run_id ORDER BY id;

-- name: event_insert
INSERT INTO events (run_id, seq, type, payload, created_at)
VALUES (:run_id, :seq, :type, :payload{json}, :now);

-- name: changes_notify
-- A row of a batch naming what it changed (store/changes): its keys, one per line. Not run on
-- SQLite: the driver sends them to the listening processes once the batch commits.
-- PostgreSQL's block (postgres.sql) sends a NOTIFY with the transaction.
SELECT :keys;

-- name: event_list
SELECT run_id, seq, type, payload, created_at FROM events
WHERE run_id = :run_id AND seq > :after ORDER BY seq LIMIT :limit;

-- name: cost_insert
INSERT INTO costs (day, agent_id, id, run_id, model, input_tokens, output_tokens,
                   cache_read_tokens, cache_write_tokens, cost_micros, estimated, created_at)
VALUES (:day, :agent_id, :id, :run_id, :model, :input_tokens, :output_tokens,
        :cache_read_tokens, :cache_write_tokens, :cost_micros, :estimated, :now);

-- name: cost_total_add
-- A cost row's part of its day's totals (cost_totals), in the cost row's transaction.
INSERT INTO cost_totals (day, agent_id, model, requests, input_tokens, output_tokens,
                         cache_read_tokens, cache_write_tokens, cost_micros, unknown,
                         priced_cache_read_tokens, priced_cache_write_tokens)
VALUES (:day, :agent_id, :model, 1, :input_tokens, :output_tokens, :cache_read_tokens,
        :cache_write_tokens, :micros, :unknown, :priced_cache_read_tokens,
        :priced_cache_write_tokens)
ON CONFLICT (day, agent_id, model) DO UPDATE SET
    requests = cost_totals.requests + 1,
    input_tokens = cost_totals.input_tokens + excluded.input_tokens,
    output_tokens = cost_totals.output_tokens + excluded.output_tokens,
    cache_read_tokens = cost_totals.cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = cost_totals.cache_write_tokens + excluded.cache_write_tokens,
    cost_micros = cost_totals.cost_micros + excluded.cost_micros,
    unknown = cost_totals.unknown + excluded.unknown,
    priced_cache_read_tokens =
        cost_totals.priced_cache_read_tokens + excluded.priced_cache_read_tokens,
    priced_cache_write_tokens =
        cost_totals.priced_cache_write_tokens + excluded.priced_cache_write_tokens;

-- name: cost_spent
SELECT COALESCE(SUM(cost_micros), 0) AS micros FROM cost_totals
WHERE day = :day AND (CAST(:agent_id AS TEXT) IS NULL OR agent_id = :agent_id);

-- name: budget_spent
-- The day's spend and its live holds: one agent's, and everyone's.
SELECT
    (SELECT COALESCE(SUM(cost_micros), 0) FROM cost_totals
     WHERE day = :day AND agent_id = :agent_id) AS agent_spent,
    (SELECT COALESCE(SUM(micros), 0) FROM budget_holds
     WHERE day = :day AND agent_id = :agent_id AND expires_at > :now) AS agent_held,
    (SELECT COALESCE(SUM(cost_micros), 0) FROM cost_totals WHERE day = :day) AS all_spent,
    (SELECT COALESCE(SUM(micros), 0) FROM budget_holds
     WHERE day = :day AND expires_at > :now) AS all_held;

-- name: budget_lock
-- Holds are taken one at a time (a no-op on SQLite, whose writes are serialised anyway).
SELECT 1;

-- name: budget_expire
DELETE FROM budget_holds WHERE day < :day OR (day = :day AND expires_at <= :now);

-- name: budget_hold
-- A hold is taken only if, with it, every given limit still holds (a NULL limit: none).
INSERT INTO budget_holds (day, agent_id, id, run_id, micros, expires_at)
SELECT :day, :agent_id, :id, :run_id, :micros, :expires_at
WHERE (CAST(:agent_limit AS BIGINT) IS NULL
       OR (SELECT COALESCE(SUM(cost_micros), 0) FROM cost_totals
           WHERE day = :day AND agent_id = :agent_id)
          + (SELECT COALESCE(SUM(micros), 0) FROM budget_holds
             WHERE day = :day AND agent_id = :agent_id)
          + :micros <= :agent_limit)
  AND (CAST(:all_limit AS BIGINT) IS NULL
       OR (SELECT COALESCE(SUM(cost_micros), 0) FROM cost_totals WHERE day = :day)
          + (SELECT COALESCE(SUM(micros), 0) FROM budget_holds WHERE day = :day)
          + :micros <= :all_limit)
RETURNING id;

-- name: budget_release
DELETE FROM budget_holds WHERE day = :day AND agent_id = :agent_id AND id = :id;

-- name: cost_summary
-- Every spend figure shown (`agentrunner cost`, `status`, the budget warnings, GET /costs) is
-- read here: each UTC day's totals per agent and model (cost_totals), from :since on, of one
-- agent or all. `unknown` counts the requests of unknown price (their cost counts as nothing);
-- the priced cache tokens are those of requests priced when made: only those are priced when
-- shown.
SELECT agent_id, model, day, requests, input_tokens, output_tokens, cache_read_tokens,
       cache_write_tokens, cost_micros, unknown, priced_cache_read_tokens,
       priced_cache_write_tokens
FROM cost_totals
WHERE day >= :since AND (CAST(:agent_id AS TEXT) IS NULL OR agent_id = :agent_id)
ORDER BY day DESC, agent_id, model;

-- name: cost_of_run
-- What a run and the runs it started, at any depth, spent (spend.run_spend): the cost rows
-- each of them made until it ended (a title it paid for afterwards is not the run's), per
-- agent and model in the order they first spent, from the UTC day it was made on to :until_day
-- (the costs key's first column). The casts: PostgreSQL sums a BIGINT column as a
-- numeric (Decimal), where an integer is meant.
WITH RECURSIVE tree(id, ended) AS (
    SELECT id, completed_at FROM runs WHERE id = :run_id
    UNION ALL
    SELECT c.id, c.completed_at FROM runs c JOIN tree t ON c.parent_run_id = t.id
)
SELECT spent.agent_id, spent.model, COUNT(*) AS requests,
       CAST(SUM(spent.input_tokens + spent.output_tokens) AS BIGINT) AS tokens,
       CAST(COALESCE(SUM(spent.cost_micros), 0) AS BIGINT) AS cost_micros,
       SUM(CASE WHEN spent.cost_micros IS NULL THEN 1 ELSE 0 END) AS unknown
FROM costs spent JOIN tree ON tree.id = spent.run_id
WHERE spent.day >= :since AND spent.day <= :until_day
  AND (tree.ended IS NULL OR spent.created_at <= tree.ended)
GROUP BY spent.agent_id, spent.model ORDER BY MIN(spent.created_at);

-- name: memory_list
SELECT label, content FROM memory_blocks WHERE agent_id = :agent_id ORDER BY label;

-- name: memory_seed
INSERT INTO memory_blocks (agent_id, label, content, updated_at)
VALUES (:agent_id, :label, :content, :now)
ON CONFLICT (agent_id, label) DO NOTHING;

-- name: memory_set
INSERT INTO memory_blocks (agent_id, label, content, updated_at)
VALUES (:agent_id, :label, :content, :now)
ON CONFLICT (agent_id, label) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at;

-- name: note_upsert
INSERT INTO notes (agent_id, slug, title, body, created_at, updated_at)
VALUES (:agent_id, :slug, :title, :body, :now, :now)
ON CONFLICT (agent_id, slug) DO UPDATE SET title = excluded.title, body = excluded.body,
    updated_at = excluded.updated_at;

-- name: note_get
SELECT slug, title, body, created_at, updated_at FROM notes WHERE agent_id = :agent_id AND slug = :slug;

-- name: note_list
SELECT slug, title, body, created_at, updated_at FROM notes WHERE agent_id = :agent_id ORDER BY updated_at DESC;

-- name: agent_state_get
SELECT agent_id, current_thread_id, updated_at FROM agent_state WHERE agent_id = :agent_id;

-- name: agent_state_thread
INSERT INTO agent_state (agent_id, current_thread_id, updated_at)
VALUES (:agent_id, :thread_id, :now)
ON CONFLICT (agent_id) DO UPDATE SET current_thread_id = excluded.current_thread_id,
    updated_at = excluded.updated_at;

-- name: agent_last_run
-- The agent's newest running run, else its newest settled one: an index read per status (one
-- ORDER BY over the statuses together sorted every run the agent ever had: the team page grew
-- with history).
SELECT id, status FROM (
    SELECT * FROM (SELECT id, status, 0 AS running_last, created_at FROM runs
                   WHERE agent_id = :agent_id AND status = 'running'
                   ORDER BY created_at DESC LIMIT 1) AS running
    UNION ALL
    SELECT * FROM (SELECT id, status, 1 AS running_last, created_at FROM runs
                   WHERE agent_id = :agent_id AND status = 'completed'
                   ORDER BY created_at DESC LIMIT 1) AS completed
    UNION ALL
    SELECT * FROM (SELECT id, status, 1 AS running_last, created_at FROM runs
                   WHERE agent_id = :agent_id AND status = 'failed'
                   ORDER BY created_at DESC LIMIT 1) AS failed
    UNION ALL
    SELECT * FROM (SELECT id, status, 1 AS running_last, created_at FROM runs
                   WHERE agent_id = :agent_id AND status = 'cancelled'
                   ORDER BY created_at DESC LIMIT 1) AS cancelled
) AS newest ORDER BY running_last, created_at DESC LIMIT 1;

-- name: lock_enqueue
-- Returns the lowest other ticket of the thread (NULL: none), so the common case, nobody
-- ahead, is one statement. The subquery leaves our own row out: whether a RETURNING
-- subquery sees the new row differs between SQLite and PostgreSQL.
INSERT INTO thread_locks (thread_id, ticket, owner, expires_at)
VALUES (:thread_id, :ticket, :owner, :expires_at)
RETURNING (SELECT MIN(o.ticket) FROM thread_locks o
           WHERE o.thread_id = :thread_id AND o.ticket <> :ticket) AS ahead;

-- name: lock_expire
DELETE FROM thread_locks WHERE thread_id = :thread_id AND expires_at < :now;

-- name: lock_renew
UPDATE thread_locks SET expires_at = :expires_at WHERE thread_id = :thread_id AND ticket = :ticket;

-- name: lock_queue
SELECT ticket, owner FROM thread_locks WHERE thread_id = :thread_id ORDER BY ticket LIMIT 1;

-- name: lock_drop
DELETE FROM thread_locks WHERE thread_id = :thread_id AND ticket = :ticket;

-- name: run_enqueue
INSERT INTO runs (id, agent_id, thread_id, status, trigger_message_id, channel_id,
                  dm_conversation_id, request, depth, created_at, trace_context)
VALUES (:id, :agent_id, :thread_id, 'created', :trigger_message_id, :channel_id,
        :dm_conversation_id, :request{json}, :depth, :now, :trace_context{json});

-- name: run_claim
-- The oldest queued run of an agent that has none running (FIFO per agent, one at a time).
-- :now is stamped by the driver once it holds the write lock, so started_at is never earlier
-- than the completion of the run before it.
UPDATE runs
SET status = 'running', started_at = :now, lease_until = :now + :lease_s,
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
    LIMIT 1)
  AND status = 'created'
RETURNING id, agent_id, thread_id, request, attempts, trigger_message_id, channel_id, depth,
          created_at, started_at, trace_context;

-- name: run_lease_renew
-- One run its worker still serves: no row changed says the run is no longer the worker's to
-- finish (the lease rules failed it while the worker was paused or cut off), so it stops it.
UPDATE runs SET lease_until = :lease_until
WHERE id = :id AND worker_id = :worker_id AND status = 'running';

-- name: runs_lease_expired
SELECT id, agent_id, thread_id, worker_id, channel_id, trigger_message_id,
       resume IS NOT NULL AS resumable FROM runs
WHERE status = 'running' AND lease_until IS NOT NULL AND lease_until < :now;

-- name: run_lease_requeue
-- guarded: a run that waited for a person and lost its worker goes back to its mailbox (its
-- journal says which approved call may have run: none runs twice), once.
UPDATE runs SET status = 'created', worker_id = NULL, lease_until = NULL
WHERE id = :id AND status = 'running' AND lease_until < :now;

-- name: run_lease_fail
-- guarded: the run fails once, so what says so in its channel is written once, with it.
UPDATE runs
SET status = 'failed', stop_reason = 'error', error_code = 'worker_lost', error_message = :message,
    completed_at = :now
WHERE id = :id AND status = 'running' AND lease_until < :now;

-- name: run_release
UPDATE runs SET status = 'created', started_at = NULL, lease_until = NULL, worker_id = NULL
WHERE id = :id AND status = 'running';

-- name: locks_drop_owner
DELETE FROM thread_locks WHERE thread_id = :thread_id AND owner LIKE :owner_prefix;

-- name: mailbox_depths
SELECT agent_id, status, COUNT(*) AS runs FROM runs
WHERE status IN ('created', 'running') GROUP BY agent_id, status;

-- name: mailbox_busy
-- Whether any run is running, or queued where a worker could claim it: not one behind a run
-- that holds its thread while it waits for a person (that one waits for a decision, not for
-- a worker).
SELECT CASE WHEN EXISTS (SELECT 1 FROM runs WHERE status = 'running')
              OR EXISTS (SELECT 1 FROM runs r WHERE r.status = 'created'
                         AND NOT EXISTS (SELECT 1 FROM threads t
                                         WHERE t.id = r.thread_id AND t.waiting_run_id <> r.id))
            THEN 1 ELSE 0 END AS busy;

-- name: worker_upsert
INSERT INTO workers (id, host, pid, concurrency, pool_size, started_at, heartbeat_at)
VALUES (:id, :host, :pid, :concurrency, :pool_size, :now, :now)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at;

-- name: worker_delete
DELETE FROM workers WHERE id = :id;

-- name: workers_alive
SELECT id, host, pid, concurrency, pool_size, started_at, heartbeat_at FROM workers
WHERE heartbeat_at > :since ORDER BY started_at;

-- name: channel_insert
INSERT INTO channels (id, name, kind, created_at) VALUES (:id, :name, :kind, :now)
ON CONFLICT (name) DO NOTHING;

-- name: channel_by_name
SELECT id, name, kind, created_at FROM channels WHERE name = :name;

-- name: channel_by_id
SELECT id, name, kind, created_at FROM channels WHERE id = :id;

-- name: channel_list
SELECT c.id, c.name, c.kind, c.created_at,
       (SELECT COUNT(*) FROM channel_members m WHERE m.channel_id = c.id) AS members
FROM channels c ORDER BY c.kind, c.name;

-- name: member_add
INSERT INTO channel_members (channel_id, member, member_kind)
VALUES (:channel_id, :member, :member_kind)
ON CONFLICT (channel_id, member) DO NOTHING;

-- name: member_list
SELECT member, member_kind FROM channel_members WHERE channel_id = :channel_id ORDER BY member;

-- name: channel_message_insert
INSERT INTO channel_messages (channel_id, id, thread_root_id, sender, sender_kind, content,
                              depth, run_id, created_at, attachments, feed_key)
VALUES (:channel_id, :id, :thread_root_id, :sender, :sender_kind, :content, :depth, :run_id,
        :now, :attachments{json}, {next_feed_key});

-- name: channel_message_get
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE channel_id = :channel_id AND id = :id;

-- name: channel_messages_before
-- What was said before a message, for an agent's transcript: notices (a failed reply, say) are
-- for people, not models.
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE channel_id = :channel_id AND id < :before AND sender_kind <> 'notice'
ORDER BY id DESC LIMIT :limit;

-- name: channel_messages_after
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE channel_id = :channel_id AND id > :after
ORDER BY id LIMIT :limit;

-- name: channel_overview
-- Every channel with how many members it has and when its newest message came: a probe of
-- the key each, not a count of its messages.
SELECT c.id, c.name, c.kind, c.created_at,
       (SELECT COUNT(*) FROM channel_members m WHERE m.channel_id = c.id) AS member_count,
       (SELECT x.created_at FROM channel_messages x WHERE x.channel_id = c.id
        ORDER BY x.id DESC LIMIT 1) AS last_message_at
FROM channels c ORDER BY c.kind, c.name;

-- name: channel_members_all
SELECT channel_id, member, member_kind FROM channel_members ORDER BY channel_id, member;

-- name: channel_messages_newest
-- The newest page of a conversation as people read it (notices included), newest first.
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE channel_id = :channel_id
ORDER BY id DESC LIMIT :limit;

-- name: channel_messages_page_before
-- The page before a message as people read it (notices included), newest first.
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE channel_id = :channel_id AND id < :before
ORDER BY id DESC LIMIT :limit;

-- name: channel_thread_replies
-- A message's thread: its replies after :after, oldest first, from channel_messages_thread
-- (sqlite.sql says so to SQLite).
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE thread_root_id = :root AND channel_id = :channel_id AND id > :after
ORDER BY id LIMIT :limit;

-- name: channel_thread_replies_newest
-- A message's thread from its newest end: its newest replies, newest first (sqlite.sql names
-- the index to SQLite).
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE thread_root_id = :root AND channel_id = :channel_id
ORDER BY id DESC LIMIT :limit;

-- name: channel_thread_replies_before
-- The replies of a thread before :before, newest first.
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages WHERE thread_root_id = :root AND channel_id = :channel_id AND id < :before
ORDER BY id DESC LIMIT :limit;

-- name: channel_reply_counts
-- How many replies each message from :first to :last has: the roots of a page of messages,
-- a range of channel_messages_thread.
SELECT thread_root_id AS root, COUNT(*) AS replies FROM channel_messages
WHERE thread_root_id >= :first AND thread_root_id <= :last AND channel_id = :channel_id
GROUP BY thread_root_id;

-- name: channel_activity_insert
INSERT INTO channel_activity (channel_id, id, run_id, type, payload, created_at, feed_key)
VALUES (:channel_id, :id, :run_id, :type, :payload{json}, :now, {next_feed_key});

-- name: channel_activity_after
SELECT channel_id, id, run_id, type, payload, created_at
FROM channel_activity WHERE channel_id = :channel_id AND id > :after
ORDER BY id LIMIT :limit;

-- name: channel_feed_after
-- A channel's feed after a position (key, id): its messages and activity rows in the order of
-- their feed keys (a transaction's rows in the order of their ids), and the key below which
-- every row is settled (store/sql.py); the two tables' ids differ in their first two letters.
SELECT f.*, s.settled FROM (
    SELECT * FROM (
        SELECT feed_key, id, thread_root_id, sender, sender_kind, content, depth, run_id,
               attachments, CAST(NULL AS TEXT) AS type, NULL{json} AS payload, created_at
        FROM channel_messages
        WHERE channel_id = :channel_id AND (feed_key, id) > (:key, :message_after)
        ORDER BY feed_key, id LIMIT :limit) m
    UNION ALL
    SELECT * FROM (
        SELECT feed_key, id, CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT),
               CAST(NULL AS TEXT), CAST(NULL AS INTEGER), run_id, NULL{json}, type, payload,
               created_at
        FROM channel_activity
        WHERE channel_id = :channel_id AND (feed_key, id) > (:key, :activity_after)
        ORDER BY feed_key, id LIMIT :limit) a
) f CROSS JOIN (SELECT {settled_feed_key} AS settled) s
ORDER BY f.feed_key, substr(f.id, 3) LIMIT :limit;

-- name: channel_feed_start
-- Where a new reader of a channel's feed starts: the (key, id) of the settled row before the
-- newest :backlog (none: from the start); with :backlog 0, the newest settled row, or the
-- settled key alone (key NULL) when there is none.
SELECT s.settled, f.feed_key, f.id FROM (SELECT {settled_feed_key} AS settled) s
LEFT JOIN (
    SELECT * FROM (
        SELECT feed_key, id FROM channel_messages
        WHERE channel_id = :channel_id AND feed_key < {settled_feed_key}
        ORDER BY feed_key DESC, id DESC LIMIT :backlog + 1) m
    UNION ALL
    SELECT * FROM (
        SELECT feed_key, id FROM channel_activity
        WHERE channel_id = :channel_id AND feed_key < {settled_feed_key}
        ORDER BY feed_key DESC, id DESC LIMIT :backlog + 1) a
) f ON 1 = 1
ORDER BY f.feed_key DESC, substr(f.id, 3) DESC LIMIT 1 OFFSET :backlog;

-- name: channel_feed_key
-- A message's or an activity row's feed key.
SELECT feed_key FROM channel_messages WHERE channel_id = :channel_id AND id = :id
UNION ALL
SELECT feed_key FROM channel_activity WHERE channel_id = :channel_id AND id = :id;

-- name: channel_messages_settled_newest
-- The newest page of a conversation as a page that streams what comes next shows it: the
-- messages settled in the channel's feed (channel_feed_after), newest first, with the settled
-- key, from which the stream gives exactly what the page could not show (one row of NULLs
-- with it when there is no message).
SELECT s.settled, m.* FROM (SELECT {settled_feed_key} AS settled) s
LEFT JOIN (
    SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id,
           created_at, attachments
    FROM channel_messages WHERE channel_id = :channel_id AND feed_key < {settled_feed_key}
    ORDER BY id DESC LIMIT :limit) m ON 1 = 1
ORDER BY m.id DESC;

-- name: channel_messages_settled_after
-- As channel_messages_settled_newest: the page after a message, oldest first.
SELECT s.settled, m.* FROM (SELECT {settled_feed_key} AS settled) s
LEFT JOIN (
    SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id,
           created_at, attachments
    FROM channel_messages
    WHERE channel_id = :channel_id AND id > :after AND feed_key < {settled_feed_key}
    ORDER BY id LIMIT :limit) m ON 1 = 1
ORDER BY m.id;

-- name: thread_senders
SELECT DISTINCT sender, sender_kind FROM channel_messages
WHERE channel_id = :channel_id AND (id = :root OR thread_root_id = :root)
  AND sender_kind <> 'notice';

-- name: run_cancel_queued
UPDATE runs SET status = 'cancelled', stop_reason = 'cancelled', completed_at = :now
WHERE id = :id AND status = 'created';

-- name: run_request_cancel
UPDATE runs SET cancel_requested = TRUE WHERE id = :id AND status = 'running';

-- name: runs_to_cancel
SELECT id FROM runs WHERE worker_id = :worker_id AND status = 'running' AND cancel_requested;

-- name: runs_cancel_requested
-- Every running run someone asked to cancel: a process with delegations running looks for
-- its own among them (a delegation has no worker of its own).
SELECT id FROM runs WHERE status = 'running' AND cancel_requested;

-- name: thread_runs_after
-- A thread's runs in the order they held it (migration 18), from the run at (:order, :after) on;
-- runs not begun yet have no place and come once they begin.
SELECT id, status, thread_order FROM runs
WHERE thread_id = :thread_id AND thread_order IS NOT NULL
  AND (thread_order > :order OR (thread_order = :order AND id >= :after))
ORDER BY thread_order, id LIMIT :limit;

-- name: thread_run_order
SELECT thread_order FROM runs WHERE id = :id AND thread_id = :thread_id;

-- name: task_cache_get
SELECT result, stored_at FROM task_cache WHERE agent_id = :agent_id AND model = :model AND cache_key = :key;

-- name: task_cache_put
INSERT INTO task_cache (agent_id, model, cache_key, result, bytes, stored_at)
VALUES (:agent_id, :model, :key, :result, :bytes, :now)
ON CONFLICT (agent_id, model, cache_key) DO UPDATE SET result = excluded.result,
    bytes = excluded.bytes, stored_at = excluded.stored_at;

-- name: task_cache_stats
SELECT agent_id, COUNT(*) AS entries, SUM(bytes) AS bytes FROM task_cache GROUP BY agent_id;

-- name: task_cache_oldest
SELECT agent_id, model, cache_key, bytes FROM task_cache ORDER BY stored_at;

-- name: task_cache_delete
DELETE FROM task_cache WHERE agent_id = :agent_id AND model = :model AND cache_key = :key;

-- name: task_cache_clear
DELETE FROM task_cache;

-- name: task_cache_clear_agent
DELETE FROM task_cache WHERE agent_id = :agent_id;

-- name: idempotency_get
SELECT fingerprint, result, created_at, expires_at FROM idempotency_keys
WHERE scope = :scope AND client_key = :client_key;

-- name: idempotency_drop_expired
DELETE FROM idempotency_keys
WHERE scope = :scope AND client_key = :client_key AND expires_at <= :now;

-- name: idempotency_record
-- A plain INSERT: a live row with the key fails the transaction it is in, so the work written
-- with it is not written twice.
INSERT INTO idempotency_keys (scope, client_key, fingerprint, result, created_at, expires_at)
VALUES (:scope, :client_key, :fingerprint, :result{json}, :now, :expires_at);

-- name: idempotency_claim
-- Claim a key for work whose result comes later (result NULL); an expired row is taken over.
INSERT INTO idempotency_keys (scope, client_key, fingerprint, result, created_at, expires_at)
VALUES (:scope, :client_key, :fingerprint, NULL, :now, :expires_at)
ON CONFLICT (scope, client_key) DO UPDATE
SET fingerprint = excluded.fingerprint, result = NULL, created_at = excluded.created_at,
    expires_at = excluded.expires_at
WHERE idempotency_keys.expires_at <= excluded.created_at;

-- name: idempotency_renew
UPDATE idempotency_keys SET expires_at = :expires_at
WHERE scope = :scope AND client_key = :client_key AND fingerprint = :fingerprint
  AND result IS NULL;

-- name: idempotency_complete
UPDATE idempotency_keys SET result = :result{json}, expires_at = :expires_at
WHERE scope = :scope AND client_key = :client_key AND fingerprint = :fingerprint
  AND result IS NULL;

-- name: idempotency_release
DELETE FROM idempotency_keys
WHERE scope = :scope AND client_key = :client_key AND fingerprint = :fingerprint
  AND result IS NULL;

-- name: idempotency_sweep
DELETE FROM idempotency_keys WHERE expires_at <= :now;

-- name: mailbox_queued
-- How many runs an agent has queued, counting no further than :limit (the bound being checked).
SELECT COUNT(*) AS runs FROM (
    SELECT 1 FROM runs WHERE agent_id = :agent_id AND status = 'created' LIMIT :limit
) AS queued;

-- name: company_session_open
-- Nothing is written when a session is active already (the UNIQUE `active` column).
INSERT INTO company_sessions (id, root_agent, thread_id, active, started_at, ended_at)
VALUES (:id, :root_agent, :thread_id, TRUE, :now, NULL)
ON CONFLICT DO NOTHING;

-- name: company_session_active
SELECT id, root_agent, thread_id, started_at, ended_at FROM company_sessions WHERE active;

-- name: company_session_get
SELECT id, root_agent, thread_id, started_at, ended_at FROM company_sessions WHERE id = :id;

-- name: company_session_cost
-- What a session's work cost: the cost rows of its root runs (those on its thread) and of
-- their delegations at any depth, from the day it started on (the costs key's first column).
WITH RECURSIVE tree(id) AS (
    SELECT r.id FROM company_sessions s JOIN runs r ON r.thread_id = s.thread_id
    WHERE s.id = :id AND r.parent_run_id IS NULL
    UNION ALL
    SELECT c.id FROM runs c JOIN tree t ON c.parent_run_id = t.id
)
SELECT COUNT(*) AS requests,
       CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens,
       CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens,
       CAST(COALESCE(SUM(cost_micros), 0) AS BIGINT) AS cost_micros,
       SUM(CASE WHEN cost_micros IS NULL THEN 1 ELSE 0 END) AS unknown
FROM costs WHERE day >= :since AND run_id IN (SELECT id FROM tree);

-- name: company_session_end
UPDATE company_sessions SET active = NULL, ended_at = :now WHERE id = :id AND active;

-- name: journal_insert
-- At most one entry per brief: a second writer (the worker and a `stop`) adds nothing.
INSERT INTO journal_entries (id, session_id, run_id, directive, summary, model, cost_micros,
                             created_at)
VALUES (:id, :session_id, :run_id, :directive, :summary, :model, :cost_micros, :now)
ON CONFLICT DO NOTHING;

-- name: journal_recent
SELECT id, session_id, run_id, directive, summary, model, cost_micros, created_at
FROM journal_entries ORDER BY id DESC LIMIT :limit;

-- name: journal_search
-- :pattern is the lower-cased search text, LIKE's wildcards escaped, wrapped in wildcards.
SELECT id, session_id, run_id, directive, summary, model, cost_micros, created_at
FROM journal_entries
WHERE LOWER(summary) LIKE :pattern ESCAPE '\' OR LOWER(directive) LIKE :pattern ESCAPE '\'
ORDER BY id DESC LIMIT :limit;

-- name: journal_pending
-- The session's completed root runs with no journal entry (briefs among them have a request).
SELECT r.id, r.request FROM company_sessions s JOIN runs r ON r.thread_id = s.thread_id
WHERE s.id = :session_id AND r.parent_run_id IS NULL AND r.status = 'completed'
  AND NOT EXISTS (SELECT 1 FROM journal_entries j WHERE j.run_id = r.id)
ORDER BY r.created_at, r.id;

-- name: company_jobs
-- A company's jobs are the root runs on its sessions' threads, newest first. Read from the
-- sessions (SQLite takes CROSS JOIN's order as given): from the runs, it read every run of
-- the project, a company's or not.
SELECT r.id, r.agent_id, r.thread_id, r.parent_run_id, r.status, r.stop_reason,
       r.trigger_message_id, r.channel_id, r.dm_conversation_id, r.request, r.model,
       r.error_code, r.error_message, r.token_usage, r.cost_micros, r.cost_known, r.depth,
       r.created_at, r.started_at, r.completed_at, r.worker_id, r.attempts,
       s.id AS session_id
FROM company_sessions s CROSS JOIN runs r
WHERE r.thread_id = s.thread_id AND r.parent_run_id IS NULL
ORDER BY r.created_at DESC, r.id DESC LIMIT :limit;

-- name: company_jobs_running
SELECT r.id, r.thread_id, r.worker_id, s.id AS session_id
FROM company_sessions s JOIN runs r ON r.thread_id = s.thread_id
WHERE r.parent_run_id IS NULL AND r.status = 'running';

-- name: run_children
SELECT id, agent_id, thread_id, parent_run_id, status, stop_reason, trigger_message_id,
       channel_id, dm_conversation_id, request, model, error_code, error_message,
       token_usage, cost_micros, cost_known, depth, created_at, started_at, completed_at,
       worker_id, attempts, trace_id
FROM runs WHERE parent_run_id = :id ORDER BY created_at, id;

-- name: company_brief_insert
-- A foreground brief's root run, running in the process named by :worker_id ("host:pid", as
-- a worker is named), so a `kill` reaches it and a dead process is seen.
INSERT INTO runs (id, agent_id, thread_id, status, request, depth, created_at, started_at,
                  worker_id)
VALUES (:id, :agent_id, :thread_id, 'running', :request{json}, 0, :now, :now, :worker_id);

-- name: run_process_gone
-- A run whose process died (it held no lease, or its lease has not run out yet).
UPDATE runs
SET status = 'failed', stop_reason = 'error', error_code = 'worker_lost', error_message = :message,
    completed_at = :now
WHERE id = :id AND status = 'running';

-- name: run_wait
-- guarded: a run pauses once, from `running`, for a person's decisions (migration 19): it
-- gives up its worker and lease; what it spent so far stays on its row.
UPDATE runs
SET status = 'waiting', resume = :resume{json}, worker_id = NULL, lease_until = NULL,
    model = :model, token_usage = :token_usage{json}, cost_micros = :cost_micros,
    cost_known = :cost_known
WHERE id = :id AND status = 'running';

-- name: run_resume_get
-- A run going on after a wait: where it stopped, and its last event's number (its events go
-- on from there).
SELECT r.resume, r.cost_micros, r.cost_known, r.token_usage,
       (SELECT COALESCE(MAX(e.seq), 0) FROM events e WHERE e.run_id = r.id) AS last_seq
FROM runs r WHERE r.id = :id;

-- name: run_resume_clear
UPDATE runs SET resume = NULL WHERE id = :id;

-- name: thread_hold
UPDATE threads SET waiting_run_id = :run_id WHERE id = :thread_id;

-- name: thread_unhold
UPDATE threads SET waiting_run_id = NULL WHERE id = :thread_id AND waiting_run_id = :run_id;

-- name: approval_insert
INSERT INTO approvals (id, run_id, agent_id, thread_id, call_id, position, kind, tool, arguments,
                       rule, waits_on, expires_at, created_at)
VALUES (:id, :run_id, :agent_id, :thread_id, :call_id, :position, :kind, :tool,
        :arguments{json}, :rule, :waits_on, :expires_at, :now);

-- name: approval_lock_run
-- A decision takes its run's row first, so two decisions on a run's last two requests are
-- one after the other: the second sees the first, and one of them queues the run again.
UPDATE runs SET status = status WHERE id = :run_id AND status = 'waiting';

-- name: approval_decide
-- guarded: the first decision wins: a request is decided once, from `pending`, and only while its run
-- waits. A decision that changes no row was not the first (its caller reads the winner).
UPDATE approvals
SET status = :status, decision_id = :decision_id, decided_by = :decided_by, decided_at = :now,
    reason = :reason, arguments_used = :arguments_used{json}, edited = :edited, always = :always,
    execution = :execution, result = :result{json}
WHERE id = :id AND status = 'pending'
  AND EXISTS (SELECT 1 FROM runs WHERE id = approvals.run_id AND status = 'waiting');

-- name: approval_requeue
-- Every request of the run decided: it is queued again in its agent's mailbox.
UPDATE runs SET status = 'created', worker_id = NULL, lease_until = NULL
WHERE id = :run_id AND status = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM approvals WHERE run_id = :run_id AND status = 'pending');

-- name: event_insert_next
-- An event of a run written from outside it (a decision on a waiting run): after its last.
INSERT INTO events (run_id, seq, type, payload, created_at)
SELECT :run_id, COALESCE(MAX(seq), 0) + 1, :type, :payload{json}, :now FROM events
WHERE run_id = :run_id;

-- name: approval_get
SELECT id, run_id, agent_id, thread_id, call_id, position, kind, tool, arguments, rule, waits_on,
       status,
       decision_id, decided_by, decided_at, reason, arguments_used, edited, always, expires_at,
       execution, result, created_at
FROM approvals WHERE id = :id;

-- name: approval_ids_starting
SELECT id FROM approvals WHERE id >= :prefix AND id < :prefix || char(1114111)
ORDER BY id LIMIT :limit;

-- name: approvals_of_run
SELECT id, run_id, agent_id, thread_id, call_id, position, kind, tool, arguments, rule, waits_on,
       status,
       decision_id, decided_by, decided_at, reason, arguments_used, edited, always, expires_at,
       execution, result, created_at
FROM approvals WHERE run_id = :run_id ORDER BY position;

-- name: approvals_pending
SELECT id, run_id, agent_id, thread_id, call_id, position, kind, tool, arguments, rule, waits_on,
       status,
       decision_id, decided_by, decided_at, reason, arguments_used, edited, always, expires_at,
       execution, result, created_at
FROM approvals WHERE status = 'pending' AND kind <> 'delegation'
ORDER BY created_at, id LIMIT :limit;

-- name: approvals_expired
SELECT id FROM approvals WHERE status = 'pending' AND expires_at < :now AND kind <> 'delegation'
ORDER BY expires_at;

-- name: approval_started
-- guarded: the journal's durable point before an approved call runs: once.
UPDATE approvals SET execution = 'started' WHERE id = :id AND execution IS NULL;

-- name: approval_finished
UPDATE approvals SET execution = 'finished', result = :result{json} WHERE id = :id;

-- name: approvals_cancel
UPDATE approvals SET status = 'cancelled', decided_by = :by, decided_at = :now
WHERE run_id = :run_id AND status = 'pending';

-- name: run_cancel_waiting
-- guarded: a run that waits for a person is cancelled at once, as a queued one is: its requests
-- and its hold on its thread go with it.
UPDATE runs SET status = 'cancelled', stop_reason = 'cancelled', completed_at = :now, resume = NULL
WHERE id = :id AND status = 'waiting';

-- name: approval_grant_insert
INSERT INTO approval_grants (id, agent_id, scope, scope_id, tool, granted_by, created_at)
VALUES (:id, :agent_id, :scope, :scope_id, :tool, :granted_by, :now)
ON CONFLICT (agent_id, scope, scope_id, tool) DO NOTHING;

-- name: approval_grants_of
SELECT id, agent_id, scope, scope_id, tool, granted_by, created_at FROM approval_grants
WHERE agent_id = :agent_id AND ((scope = 'agent' AND scope_id = :agent_id)
                                OR (scope = 'thread' AND scope_id = :thread_id));

-- name: approval_grants_list
SELECT id, agent_id, scope, scope_id, tool, granted_by, created_at FROM approval_grants
ORDER BY created_at, id;

-- name: approval_grant_delete
DELETE FROM approval_grants WHERE id = :id;

-- name: approval_waiting_on
SELECT id, run_id, agent_id, thread_id, call_id, position, kind, tool, arguments, rule, waits_on,
       status, decision_id, decided_by, decided_at, reason, arguments_used, edited, always,
       expires_at, execution, result, created_at
FROM approvals WHERE waits_on = :child AND status = 'pending';

-- name: approval_child_done
-- Its end answers the waiting run's call: the call's result, as the journal stores one.
UPDATE approvals
SET status = 'approved', decided_by = :by, decided_at = :now, execution = 'finished',
    result = :result{json}
WHERE waits_on = :child AND status = 'pending';

-- name: attachment_insert
-- A file kept by its digest: the same bytes again, from any message, leave the one copy.
INSERT INTO attachments (sha256, media_type, size, width, height, pages, data, created_at)
VALUES (:sha256, :media_type, :size, :width, :height, :pages, :data, :now)
ON CONFLICT (sha256) DO NOTHING;

-- name: attachment_use_insert
INSERT INTO attachment_uses (thread_id, seq, sha256, name)
VALUES (:thread_id, :seq, :sha256, :name)
ON CONFLICT (thread_id, seq, sha256) DO NOTHING;

-- name: attachment_get
SELECT sha256, media_type, size, width, height, pages, created_at
FROM attachments WHERE sha256 = :sha256;

-- name: attachment_data
SELECT data FROM attachments WHERE sha256 = :sha256;

-- name: attachment_uses_of_thread
SELECT DISTINCT sha256 FROM attachment_uses WHERE thread_id = :thread_id;

-- name: attachment_uses_count
SELECT COUNT(*) AS n FROM attachment_uses WHERE sha256 = :sha256;

-- name: attachment_stats
SELECT COUNT(*) AS files, COALESCE(SUM(size), 0) AS bytes FROM attachments;

-- name: attachment_delete_unused
-- A file no message names any more (its last thread deleted).
DELETE FROM attachments
WHERE sha256 = :sha256
  AND NOT EXISTS (SELECT 1 FROM attachment_uses u WHERE u.sha256 = :sha256);

-- name: thread_children
SELECT id FROM threads WHERE parent_thread_id = :id;

-- name: thread_live_run
-- A run on the thread not settled yet: queued, running, or waiting for a person.
SELECT id, status FROM runs
WHERE thread_id = :thread_id AND status IN ('created', 'running', 'waiting') LIMIT 1;

-- name: thread_messages_delete
DELETE FROM messages WHERE thread_id = :thread_id;

-- name: thread_summaries_delete
DELETE FROM thread_summaries WHERE thread_id = :thread_id;

-- name: thread_attachment_uses_delete
DELETE FROM attachment_uses WHERE thread_id = :thread_id;

-- name: thread_delete
-- guarded: a thread is deleted with nothing running on it; a run that began after the check
-- refuses the whole batch, messages and files with it.
DELETE FROM threads
WHERE id = :id
  AND NOT EXISTS (
      SELECT 1 FROM runs WHERE thread_id = :id AND status IN ('created', 'running', 'waiting')
  );

-- name: schedule_start
-- A schedule seen for the first time starts from now: no tick before it fires.
INSERT INTO schedule_state (name, cursor_ms, paused, updated_at)
VALUES (:name, :cursor_ms, FALSE, :now)
ON CONFLICT (name) DO NOTHING;

-- name: schedule_states
SELECT name, cursor_ms, paused, updated_at FROM schedule_state;

-- name: schedule_advance
-- guarded: a tick is decided once: the batch that would move a schedule's cursor from where
-- another process already moved it (its fires, its runs) is refused whole.
UPDATE schedule_state SET cursor_ms = :cursor_ms, updated_at = :now
WHERE name = :name AND cursor_ms = :seen_ms AND paused = FALSE;

-- name: schedule_pause
INSERT INTO schedule_state (name, cursor_ms, paused, updated_at)
VALUES (:name, :cursor_ms, TRUE, :now)
ON CONFLICT (name) DO UPDATE SET paused = TRUE, updated_at = :now;

-- name: schedule_resume
-- From now on: the ticks that passed while it was paused are not missed, they were refused.
-- The cursor never goes back (a clock set back before the resume): a tick decided stays decided.
UPDATE schedule_state
SET paused = FALSE, updated_at = :now,
    cursor_ms = CASE WHEN cursor_ms < :cursor_ms THEN :cursor_ms ELSE cursor_ms END
WHERE name = :name;

-- name: schedule_fire
-- guarded: a fire is written once, with its run: the batch whose fire (schedule, tick) another
-- wrote first is refused whole, its run with it (a run-now has no cursor to guard it).
INSERT INTO schedule_fires (schedule, tick_ms, outcome, reason, run_id, missed, fired_at,
                            feed_key)
VALUES (:schedule, :tick_ms, :outcome, :reason, :run_id, :missed, :now, {next_fire_key})
ON CONFLICT (schedule, tick_ms) DO NOTHING;

-- name: schedule_fires_recent
SELECT f.schedule, f.tick_ms, f.outcome, f.reason, f.run_id, f.missed, f.fired_at,
       r.status AS run_status, r.error_code, r.thread_id, r.channel_id
FROM schedule_fires f LEFT JOIN runs r ON r.id = f.run_id
WHERE f.schedule = :schedule AND f.tick_ms < :before_ms
ORDER BY f.tick_ms DESC LIMIT :limit;

-- name: schedule_fires_after
-- The fires after a position (key, schedule, tick) in the order they were committed (their
-- feed keys; a transaction's by schedule and tick), each with its run's status, and the key
-- below which every fire is settled (store/sql.py).
SELECT f.*, s.settled FROM (
    SELECT g.feed_key, g.schedule, g.tick_ms, g.outcome, g.reason, g.run_id, g.missed,
           g.fired_at, r.status AS run_status, r.error_code, r.thread_id
    FROM schedule_fires g LEFT JOIN runs r ON r.id = g.run_id
    WHERE (g.feed_key, g.schedule, g.tick_ms) > (:key, :schedule, :tick_ms)
    ORDER BY g.feed_key, g.schedule, g.tick_ms LIMIT :limit
) f CROSS JOIN (SELECT {settled_fire_key} AS settled) s
ORDER BY f.feed_key, f.schedule, f.tick_ms;

-- name: schedule_fires_settled
-- The key below which every fire is settled: where a reader that starts now starts.
SELECT {settled_fire_key} AS settled;

-- name: schedule_fires_last
-- Each schedule's newest fire, with its run's status: what `schedules` and `status` list. The
-- schedules are found by skipping from one to the next along the key, and each one's newest
-- fire is its key's last: a read per schedule (by each fire, it read every fire ever made).
WITH RECURSIVE names (schedule) AS (
    SELECT MIN(schedule) FROM schedule_fires
    UNION ALL
    SELECT (SELECT MIN(g.schedule) FROM schedule_fires g WHERE g.schedule > n.schedule)
    FROM names n WHERE n.schedule IS NOT NULL
)
SELECT f.schedule, f.tick_ms, f.outcome, f.reason, f.run_id, f.missed, f.fired_at,
       r.status AS run_status, r.error_code, r.thread_id, r.channel_id
FROM names n
CROSS JOIN schedule_fires f
LEFT JOIN runs r ON r.id = f.run_id
WHERE f.schedule = n.schedule
  AND f.tick_ms = (SELECT MAX(g.tick_ms) FROM schedule_fires g WHERE g.schedule = n.schedule);

-- name: schedule_run_live
-- The newest queued fire's run, while it has not ended: what an overlap rule looks at.
SELECT r.id, r.status FROM schedule_fires f JOIN runs r ON r.id = f.run_id
WHERE f.schedule = :schedule AND f.outcome = 'queued'
  AND r.status IN ('created', 'running', 'waiting')
ORDER BY f.tick_ms DESC LIMIT 1;

-- name: schedule_fire_count
SELECT schedule, outcome, COUNT(*) AS n FROM schedule_fires GROUP BY schedule, outcome;

-- name: thread_fork
-- guarded: a fork begins with its parent's first :at messages: refused when message :at is
-- no longer there (the parent was rewound meanwhile). The newest summary at or before :at is
-- the fork's; no session carries over (the fork's first run sends its whole history).
INSERT INTO threads (id, agent_id, title, session_state, parent_thread_id, message_count,
                     summary_through, forked_from, forked_at, created_at, updated_at)
SELECT :id, agent_id, title, :session_state{json}, NULL, :at,
       (SELECT COALESCE(MAX(through_seq), 0) FROM thread_summaries
        WHERE thread_id = :parent AND through_seq <= :at),
       :parent, :at, :now, :now
FROM threads
WHERE id = :parent
  AND (:at = 0 OR EXISTS (SELECT 1 FROM messages WHERE thread_id = :parent AND seq = :at));

-- name: thread_fork_messages
-- Each message as it was stored, body and all: the fork's history is its parent's prefix.
INSERT INTO messages (thread_id, seq, role, body, run_id, created_at)
SELECT :id, seq, role, body, run_id, created_at FROM messages
WHERE thread_id = :parent AND seq <= :at;

-- name: thread_fork_summaries
INSERT INTO thread_summaries (thread_id, through_seq, summary, model, run_id, requests,
                              cost_micros, created_at)
SELECT :id, through_seq, summary, model, run_id, requests, cost_micros, created_at
FROM thread_summaries WHERE thread_id = :parent AND through_seq <= :at;

-- name: thread_fork_files
INSERT INTO attachment_uses (thread_id, seq, sha256, name)
SELECT :id, seq, sha256, name FROM attachment_uses WHERE thread_id = :parent AND seq <= :at;

-- name: thread_rewind
-- guarded: a thread is cut back with nothing running on it, as it is deleted (thread_delete).
UPDATE threads
SET message_count = :at,
    summary_through = (SELECT COALESCE(MAX(through_seq), 0) FROM thread_summaries
                       WHERE thread_id = :id AND through_seq <= :at),
    session_run_id = NULL,
    updated_at = :now
WHERE id = :id
  AND NOT EXISTS (
      SELECT 1 FROM runs WHERE thread_id = :id AND status IN ('created', 'running', 'waiting')
  );

-- name: thread_rewind_messages
DELETE FROM messages WHERE thread_id = :id AND seq > :at;

-- name: thread_rewind_summaries
DELETE FROM thread_summaries WHERE thread_id = :id AND through_seq > :at;

-- name: thread_rewind_files
DELETE FROM attachment_uses WHERE thread_id = :id AND seq > :at;

-- name: attachment_uses_after
SELECT DISTINCT sha256 FROM attachment_uses WHERE thread_id = :id AND seq > :at;

-- name: message_first_of_run
-- The first of a thread's messages a run wrote (its person's message): a replay forks before it.
SELECT MIN(seq) AS seq FROM messages WHERE thread_id = :thread_id AND run_id = :run_id;

-- name: eval_run_start
INSERT INTO eval_runs (id, eval, agent, file, status, threshold, repeats, started_at)
VALUES (:id, :eval, :agent, :file, 'running', :threshold, :repeats, :now);

-- name: eval_case_add
INSERT INTO eval_cases (eval_run_id, variant, name, repeat, position, run_id, passed, checks,
                        error, cost_micros, judge_cost_micros, tokens, seconds)
VALUES (:eval_run_id, :variant, :name, :repeat, :position, :run_id, :passed, :checks{json},
        :error, :cost_micros, :judge_cost_micros, :tokens, :seconds);

-- name: eval_run_end
-- An eval run is settled once, from running.
UPDATE eval_runs
SET status = :status, passed = :passed, variants = :variants{json},
    judge_cost_micros = :judge_cost_micros, ended_at = :now
WHERE id = :id AND status = 'running';

-- name: eval_runs_recent
-- The newest eval runs (of one eval, or of all) started before :before: `agentrunner evals`,
-- the dashboard's history.
SELECT id, eval, agent, file, status, threshold, repeats, passed, variants, judge_cost_micros,
       started_at, ended_at,
       (SELECT COUNT(*) FROM eval_cases c WHERE c.eval_run_id = e.id) AS cases_done
FROM eval_runs e
WHERE (CAST(:eval AS TEXT) IS NULL OR eval = :eval) AND started_at < :before
ORDER BY started_at DESC, id DESC LIMIT :limit;

-- name: eval_run_get
SELECT id, eval, agent, file, status, threshold, repeats, passed, variants, judge_cost_micros,
       started_at, ended_at,
       (SELECT COUNT(*) FROM eval_cases c WHERE c.eval_run_id = e.id) AS cases_done
FROM eval_runs e WHERE id = :id;

-- name: eval_run_ids
-- Eval runs whose id begins with what was given, or ends with it (a short id, as the table
-- shows one).
SELECT id FROM eval_runs WHERE id LIKE :start ESCAPE '\' OR id LIKE :ending ESCAPE '\'
ORDER BY started_at DESC LIMIT 3;

-- name: eval_cases_of
-- An eval run's cases in the file's order, each with its run's status (NULL once the run's
-- thread is deleted).
SELECT c.variant, c.name, c.repeat, c.run_id, c.passed, c.checks, c.error, c.cost_micros,
       c.judge_cost_micros, c.tokens, c.seconds, r.status AS run_status
FROM eval_cases c LEFT JOIN runs r ON r.id = c.run_id
WHERE c.eval_run_id = :id
ORDER BY c.variant, c.position, c.repeat;

-- name: embedding_cursor
SELECT through_seq FROM thread_embedded WHERE thread_id = :thread_id;

-- name: embedding_candidates
-- A thread's messages after its cursor, each with the agent whose run wrote it (none for a
-- message no run wrote: a fork's opening copy is embedded with its own thread).
SELECT m.seq, m.body, r.agent_id
FROM messages m LEFT JOIN runs r ON r.id = m.run_id
WHERE m.thread_id = :thread_id AND m.seq > :after
ORDER BY m.seq LIMIT :limit;

-- name: embedding_insert
INSERT INTO message_embeddings (thread_id, seq, agent_id, model, vector, created_at)
VALUES (:thread_id, :seq, :agent_id, :model, :vector, :now)
ON CONFLICT (thread_id, seq) DO NOTHING;

-- name: embedding_cursor_set
-- Forward only: two effects for one thread never move it back.
INSERT INTO thread_embedded (thread_id, through_seq) VALUES (:thread_id, :seq)
ON CONFLICT (thread_id) DO UPDATE SET through_seq = excluded.through_seq
WHERE thread_embedded.through_seq < excluded.through_seq;

-- name: embeddings_of_agent
-- Every vector of one agent's messages by one model: what `recall` compares (exact search).
SELECT thread_id, seq, vector FROM message_embeddings
WHERE agent_id = :agent_id AND model = :model;

-- name: embedded_message
SELECT m.body, m.created_at FROM messages m WHERE m.thread_id = :thread_id AND m.seq = :seq;

-- name: run_last_trigger
-- A channel agent's thread: the message its last completed run there answered (the runs
-- index on (thread_id, created_at) finds it); what came after is the next run's transcript.
SELECT trigger_message_id FROM runs
WHERE thread_id = :thread_id AND id <> :run_id AND status = 'completed'
      AND trigger_message_id IS NOT NULL
ORDER BY created_at DESC LIMIT 1;

-- name: retention_claim
-- One process applies the [retention] rules at a time: it holds the pass until :expires_at (one
-- that died holding it loses it then). No row comes back when another holds it.
INSERT INTO retention_state (rule, through_at, through_id, holder, expires_at)
VALUES ('pass', 0, '', :holder, :expires_at)
ON CONFLICT (rule) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE retention_state.expires_at < :now OR retention_state.holder = :holder
RETURNING holder;

-- name: retention_release
UPDATE retention_state SET expires_at = 0 WHERE rule = 'pass' AND holder = :holder;

-- name: retention_cursor
SELECT through_at, through_id FROM retention_state WHERE rule = :rule;

-- name: retention_advance
-- How far a rule has come: the last settled run it went through, in (completed_at, id) order.
INSERT INTO retention_state (rule, through_at, through_id, holder, expires_at)
VALUES (:rule, :through_at, :through_id, '', 0)
ON CONFLICT (rule) DO UPDATE SET through_at = excluded.through_at,
    through_id = excluded.through_id;

-- name: retention_runs
-- The next settled runs a rule goes through, in the order they settled (runs_settled): after
-- (:after_at, :after_id), settled by :until. What each holds is counted, and `kept` says that
-- it must stay whoever asks: a run still waited on by a run of its own that has not settled, or
-- the newest completed run of its thread (a channel agent's next run reads its transcript from
-- the message that run answered).
SELECT r.id, r.completed_at,
       (SELECT COUNT(*) FROM events e WHERE e.run_id = r.id) AS events,
       (SELECT COUNT(*) FROM events e
        WHERE e.run_id = r.id AND e.type IN ('agent.token', 'agent.thinking')) AS deltas,
       -- delta rows right after one of their kind: none, and the compaction has nothing to
       -- merge (it reads a run's deltas only when there is)
       (SELECT COUNT(*) FROM events e JOIN events p ON p.run_id = e.run_id
                                                 AND p.seq = e.seq - 1 AND p.type = e.type
        WHERE e.run_id = r.id AND e.type IN ('agent.token', 'agent.thinking')) AS following,
       (SELECT COUNT(*) FROM run_messages m WHERE m.run_id = r.id) AS run_messages,
       (SELECT COUNT(*) FROM run_steps s WHERE s.run_id = r.id) AS steps,
       CASE WHEN EXISTS (SELECT 1 FROM runs c
                         WHERE c.parent_run_id = r.id
                           AND c.status IN ('created', 'running', 'waiting'))
              OR (r.thread_id IS NOT NULL AND r.status = 'completed'
                  AND NOT EXISTS (SELECT 1 FROM runs n
                                  WHERE n.thread_id = r.thread_id AND n.status = 'completed'
                                    AND n.created_at > r.created_at))
            THEN 1 ELSE 0 END AS kept
FROM runs r
WHERE r.completed_at IS NOT NULL AND r.completed_at <= :until
  AND (r.completed_at, r.id) > (:after_at, :after_id)
  -- `|| ''`: not a condition an index answers, so that SQLite walks runs_settled (by status,
  -- it read every settled run and sorted them: 80 ms a batch at 51,000 runs, 5 ms this way)
  AND r.status || '' IN ('completed', 'failed', 'cancelled')
ORDER BY r.completed_at, r.id LIMIT :batch;

-- name: retention_deltas
-- A run's token deltas in order, for their compaction.
SELECT seq, type, payload FROM events
WHERE run_id = :run_id AND type IN ('agent.token', 'agent.thinking') ORDER BY seq;

-- name: retention_delta_merge
-- A stream's deltas made one row: the first takes the whole text, the rest (the seqs right after
-- it, to :last) go.
UPDATE events SET payload = :payload{json} WHERE run_id = :run_id AND seq = :seq;

-- name: retention_delta_drop
DELETE FROM events WHERE run_id = :run_id AND seq > :seq AND seq <= :last AND type = :type;

-- name: retention_drop_events
DELETE FROM events WHERE run_id = :run_id;

-- name: retention_drop_deltas
DELETE FROM events WHERE run_id = :run_id AND type IN ('agent.token', 'agent.thinking');

-- name: retention_drop_run_messages
DELETE FROM run_messages WHERE run_id = :run_id;

-- name: retention_mark
-- What a rule removed of a run that stays, beside what others removed (a rule walks a run once).
UPDATE runs SET pruned = CASE WHEN pruned IS NULL THEN :what ELSE pruned || ',' || :what END
WHERE id = :run_id;

-- name: retention_drop_run
-- Its steps and run messages go with it (their foreign keys cascade); its events are dropped
-- beside it (retention_drop_events); its cost rows stay ([retention] costs_days).
DELETE FROM runs WHERE id = :run_id;

-- name: retention_costs_count
SELECT COUNT(*) AS n FROM costs WHERE day < :day;

-- name: retention_drop_costs
-- The oldest cost rows, a batch at a time (the totals that reports read stay: cost_totals).
DELETE FROM costs WHERE day < :day
  AND id IN (SELECT id FROM costs WHERE day < :day ORDER BY day LIMIT :batch);
