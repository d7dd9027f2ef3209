-- The schema, one for both back ends. `{json}` is TEXT on SQLite and jsonb on PostgreSQL;
-- `{serial}` is an increasing integer key; `{clustered}` makes SQLite store a table in its
-- primary key's order (WITHOUT ROWID: one B-tree, not two). Times are UNIX epoch seconds
-- (double precision) everywhere, so the same queries serve both back ends.

-- migration: 1
CREATE TABLE threads (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    title TEXT,
    session_run_id TEXT,
    session_state {json} NOT NULL,
    active_task TEXT,
    parent_thread_id TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
){clustered};
CREATE INDEX threads_agent_updated ON threads (agent_id, updated_at);
CREATE INDEX threads_updated ON threads (updated_at);

CREATE TABLE messages (
    thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    body {json} NOT NULL,
    run_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (thread_id, seq)
){clustered};

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    thread_id TEXT,
    parent_run_id TEXT,
    status TEXT NOT NULL DEFAULT 'created',
    stop_reason TEXT,
    trigger_message_id TEXT,
    channel_id TEXT,
    dm_conversation_id TEXT,
    request {json},
    model TEXT,
    error_code TEXT,
    error_message TEXT,
    token_usage {json},
    cost_micros BIGINT NOT NULL DEFAULT 0,
    cost_known BOOLEAN NOT NULL DEFAULT TRUE,
    depth INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    completed_at DOUBLE PRECISION
){clustered};
CREATE INDEX runs_agent_status ON runs (agent_id, status, created_at, id);
CREATE INDEX runs_status_created ON runs (status, created_at, id);
CREATE INDEX runs_thread_created ON runs (thread_id, created_at);

CREATE TABLE run_steps (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_number INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    model_id TEXT NOT NULL,
    token_usage {json},
    cost_micros BIGINT,
    attempts {json},
    created_at DOUBLE PRECISION NOT NULL,
    completed_at DOUBLE PRECISION
){clustered};
CREATE INDEX run_steps_run_step ON run_steps (run_id, step_number);

-- Run messages are keyed (run_id, id) with time-ordered ids: the key is seed 003's
-- INDEX(run_id, created_at) order.
CREATE TABLE run_messages (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    step_id TEXT REFERENCES run_steps (id) ON DELETE CASCADE,
    message_type TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_name TEXT,
    tool_input {json},
    tool_call_id TEXT,
    is_error BOOLEAN,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, id)
){clustered};
CREATE INDEX run_messages_step ON run_messages (step_id);

CREATE TABLE events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload {json} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, seq)
){clustered};

CREATE TABLE costs (
    day TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cost_micros BIGINT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (day, agent_id, id)
){clustered};

CREATE TABLE memory_blocks (
    agent_id TEXT NOT NULL,
    label TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_id, label)
){clustered};

CREATE TABLE notes (
    agent_id TEXT NOT NULL,
    slug TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_id, slug)
){clustered};

-- An agent's session thread. Its status (idle / working / error) is not stored: it is what
-- its runs say (a running run, or a last run that failed).
CREATE TABLE agent_state (
    agent_id TEXT PRIMARY KEY,
    current_thread_id TEXT,
    updated_at DOUBLE PRECISION NOT NULL
){clustered};

-- Lock tickets are increasing integers handed out by the store (time-based), so the lowest
-- live ticket of a thread is the earliest waiter.
CREATE TABLE thread_locks (
    thread_id TEXT NOT NULL,
    ticket BIGINT NOT NULL,
    owner TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (thread_id, ticket)
){clustered};

-- migration: 2
-- Channels (seed 003): public and private rooms, DMs; members are agents and people.
CREATE TABLE channels (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
){clustered};

CREATE TABLE channel_members (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    member TEXT NOT NULL,
    member_kind TEXT NOT NULL,
    PRIMARY KEY (channel_id, member)
){clustered};

-- A message's id is time-ordered; `thread_root_id` is set on a thread reply; `depth` counts
-- agent-to-agent hops since a person spoke (the cascade stops at the configured chain depth).
CREATE TABLE channel_messages (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    thread_root_id TEXT,
    sender TEXT NOT NULL,
    sender_kind TEXT NOT NULL,
    content TEXT NOT NULL,
    depth INTEGER NOT NULL,
    run_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (channel_id, id)
){clustered};
CREATE INDEX channel_messages_thread ON channel_messages (thread_root_id, id);

-- Workers announce themselves and renew a heartbeat; a claimed run holds a lease its worker
-- renews. A run whose lease expired is failed (never re-run: its tools may have had effects).
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    concurrency INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
){clustered};

ALTER TABLE runs ADD COLUMN worker_id TEXT;
ALTER TABLE runs ADD COLUMN lease_until DOUBLE PRECISION;
ALTER TABLE runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0

-- migration: 3
-- Cancelling a run another process is running: the flag is set here, its worker sees it and
-- aborts the run.
ALTER TABLE runs ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE

-- migration: 4
-- The task result cache when `[cache] backend = "store"` (seed 004's second implementation):
-- one row per (agent, model, key); the result is opaque JSON text.
CREATE TABLE task_cache (
    agent_id TEXT NOT NULL,
    model TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    result TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    stored_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_id, model, cache_key)
){clustered}
;

-- migration: 5
-- Thread lists filter by agent inside one query whose planner always walks threads_updated;
-- this index was never read, and every run's end paid for moving the thread in it.
DROP INDEX threads_agent_updated;

-- migration: 6
-- A run's system and user messages belong to no step. Their NULL entries all sorted into one
-- spot mid-index, so every run split a page there; step lookups (and the cascade from
-- run_steps) never ask for NULL.
DROP INDEX run_messages_step;
CREATE INDEX run_messages_step ON run_messages (step_id) WHERE step_id IS NOT NULL;

-- migration: 7
-- Each UTC day's spend per agent, written with the cost rows: a daily budget check reads one
-- row (one per agent for the global budget), where summing the day's cost rows grew with every
-- request (8 ms at 100,000 requests a day, on every run).
CREATE TABLE cost_days (
    day TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    micros BIGINT NOT NULL,
    PRIMARY KEY (day, agent_id)
){clustered};
INSERT INTO cost_days (day, agent_id, micros)
SELECT day, agent_id, SUM(cost_micros) FROM costs
WHERE cost_micros IS NOT NULL GROUP BY day, agent_id;

-- migration: 8
-- One agent's threads, for listings by agent: walking every thread by updated_at for the few of
-- a rarely used agent took 20 ms at 100,000 threads. A thread's agent never changes, so this
-- index is written once, when the thread is made; one on (agent_id, updated_at) would answer
-- listings directly, but every run's end would move the thread in it (migration 5).
CREATE INDEX threads_agent ON threads (agent_id);

-- migration: 9
-- A run's steps are keyed by their run (step ids are time-ordered, so the key keeps them in
-- order), and a run message names its step without a foreign key. Both only ever go with their
-- run, whose deletion cascades to each; the step-by-id key, the run_steps_run_step index and
-- the run_messages_step index (there for a cascade from a single step that nothing deletes)
-- cost every run six pages written and a lookup per run message.
CREATE TABLE run_messages_v9 (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    step_id TEXT,
    message_type TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_name TEXT,
    tool_input {json},
    tool_call_id TEXT,
    is_error BOOLEAN,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, id)
){clustered};
INSERT INTO run_messages_v9 (run_id, id, step_id, message_type, content, tool_name, tool_input,
                             tool_call_id, is_error, created_at)
SELECT run_id, id, step_id, message_type, content, tool_name, tool_input, tool_call_id,
       is_error, created_at
FROM run_messages;
DROP TABLE run_messages;
ALTER TABLE run_messages_v9 RENAME TO run_messages;

CREATE TABLE run_steps_v9 (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    step_number INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    model_id TEXT NOT NULL,
    token_usage {json},
    cost_micros BIGINT,
    attempts {json},
    created_at DOUBLE PRECISION NOT NULL,
    completed_at DOUBLE PRECISION,
    PRIMARY KEY (run_id, id)
){clustered};
INSERT INTO run_steps_v9 (run_id, id, step_number, status, model_id, token_usage, cost_micros,
                          attempts, created_at, completed_at)
SELECT run_id, id, step_number, status, model_id, token_usage, cost_micros, attempts,
       created_at, completed_at
FROM run_steps;
DROP TABLE run_steps;
ALTER TABLE run_steps_v9 RENAME TO run_steps
;

-- migration: 10
-- Budget holds (DESIGN decision 9): before a model request is sent, its worst case is held
-- against the day's budgets, and the hold is deleted in the transaction that records what the
-- request really cost, so concurrent runs — in any process — never count on the same remainder.
-- A hold whose process died is ignored once it expires. A cost recorded from agentrunner's
-- estimate (a request cut off before the provider reported usage) is marked as such.
CREATE TABLE budget_holds (
    day TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    micros BIGINT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (day, agent_id, id)
){clustered};
ALTER TABLE costs ADD COLUMN estimated BOOLEAN NOT NULL DEFAULT FALSE
;

-- migration: 11
-- Idempotency keys (docs/http-api.md): a client's retry of a POST — a queued run, a channel
-- post, a chat completion — with the same Idempotency-Key gets the first response and starts
-- nothing, whichever process answers it. `scope` is the route and the caller the key belongs
-- to; `fingerprint` the first request's (a different request with the key is refused);
-- `result` what a repeat is answered from, NULL while the first request is still being served
-- (its claim renewed until `expires_at`). Expired rows are ignored, and deleted as met.
CREATE TABLE idempotency_keys (
    scope TEXT NOT NULL,
    client_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result {json},
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (scope, client_key)
){clustered};
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at)

-- migration: 12
-- Company mode (seed 002, DESIGN decision 6): a company session is the root agent's session
-- thread marked active. `active` is TRUE while it is, NULL once it ended: the UNIQUE constraint
-- (NULLs never clash) keeps at most one active session per project, in any process. A journal
-- entry is a model-written summary of one brief (its root run), at most one per brief.
CREATE TABLE company_sessions (
    id TEXT PRIMARY KEY,
    root_agent TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    active BOOLEAN UNIQUE,
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION
){clustered};
CREATE INDEX company_sessions_thread ON company_sessions (thread_id);

CREATE TABLE journal_entries (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL UNIQUE,
    directive TEXT NOT NULL,
    summary TEXT NOT NULL,
    model TEXT,
    cost_micros BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
){clustered};

-- A brief's delegations are its child runs: followed by `agentrunner logs`. Only child runs are
-- in this index, so a run without a parent writes nothing to it.
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL

-- migration: 13
-- A run's OpenTelemetry trace id (32 hex digits), kept when telemetry was on, so that a run
-- found in the database can be found in the tracing tool (`runs show`).
ALTER TABLE runs ADD COLUMN trace_id TEXT

-- migration: 14
-- The trace context a queued run was queued in (the W3C traceparent and tracestate, as
-- OpenTelemetry's propagators write them), kept when telemetry was on, so that the worker that
-- claims the run, in whichever process, continues that trace.
ALTER TABLE runs ADD COLUMN trace_context {json}

-- migration: 15
-- Compaction (docs/engine.md, "History"): when a thread outgrows its model's context window, its
-- older messages are summarized by a model, and from then on a run sends the newest summary and
-- the messages after it; the messages themselves stay. `through_seq` is the last message a
-- summary covers; each summary is kept, the thread's `summary_through` points at the newest (0:
-- never compacted), so a run reads a summary only for a thread that has one. `run_id` is the run
-- whose account paid for it (its cost rows).
CREATE TABLE thread_summaries (
    thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    through_seq INTEGER NOT NULL,
    summary TEXT NOT NULL,
    model TEXT NOT NULL,
    run_id TEXT NOT NULL,
    requests INTEGER NOT NULL,
    cost_micros BIGINT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (thread_id, through_seq)
){clustered};
ALTER TABLE threads ADD COLUMN summary_through INTEGER NOT NULL DEFAULT 0

-- migration: 16
-- What a channel's people see of its agents at work: a member's run started (agent.working),
-- failed (agent.failed) or ended (agent.idle), written with the run's own event. Keyed by
-- time-ordered ids as the channel's messages are, so a channel's stream, in any process, reads
-- both in the order they happened.
CREATE TABLE channel_activity (
    channel_id TEXT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    type TEXT NOT NULL,
    payload {json} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (channel_id, id)
){clustered}

-- migration: 17
-- A channel's feed in the order its rows were committed (channels/feed): each row's feed key,
-- written by its insert (`{next_feed_key}`, store/sql.py): on PostgreSQL the id of the
-- transaction that wrote it, on SQLite the channel's next number. A reader gives a row only
-- once every row with a smaller key is committed or never will be, so a position (key, id) is
-- exact. Rows written before this migration have key 0, in the order of their ids.
ALTER TABLE channel_messages ADD COLUMN feed_key BIGINT NOT NULL DEFAULT 0;
ALTER TABLE channel_activity ADD COLUMN feed_key BIGINT NOT NULL DEFAULT 0;
CREATE INDEX channel_messages_feed ON channel_messages (channel_id, feed_key, id);
CREATE INDEX channel_activity_feed ON channel_activity (channel_id, feed_key, id)

-- migration: 18
-- The order a thread's runs held it (a thread's stream, /threads/{id}/events): each run on a
-- thread numbered as it begins, under the thread's lock, one more than the thread's last, in
-- the transaction that writes its first events, so the numbers follow the order the runs'
-- events were written whatever order their ids are in (a run queued earlier may run later).
-- Runs that began before this migration are 0, in the order of their ids; one not begun has
-- none.
ALTER TABLE runs ADD COLUMN thread_order BIGINT;
UPDATE runs SET thread_order = 0 WHERE thread_id IS NOT NULL AND status <> 'created';
CREATE INDEX runs_thread_order ON runs (thread_id, thread_order, id)

-- migration: 19
-- A person in the loop (docs/approvals.md). A run whose step asks for calls that need a
-- person's yes settles `waiting`: no worker, no lease; its thread is held by it
-- (threads.waiting_run_id: no other run takes the thread until it settles) and what it needs
-- to go on is in runs.resume (its counters and the finished results of the paused step). Each
-- call waiting for a decision is a row of `approvals`, decided once (a guarded update: the
-- first decision wins); an approved call is journalled `started` before it runs and
-- `finished` with its result after, so no crash runs it twice. "Always" is a grant. A run whose
-- delegation waits (kind `delegation`) has a request the delegated run's end answers
-- (`waits_on`), not a person.
ALTER TABLE runs ADD COLUMN resume {json};
ALTER TABLE threads ADD COLUMN waiting_run_id TEXT;
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    thread_id TEXT,
    call_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    kind TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments {json} NOT NULL,
    rule TEXT NOT NULL,
    waits_on TEXT,
    status TEXT NOT NULL DEFAULT 'pending',
    decision_id TEXT,
    decided_by TEXT,
    decided_at DOUBLE PRECISION,
    reason TEXT,
    arguments_used {json},
    edited BOOLEAN NOT NULL DEFAULT FALSE,
    always TEXT,
    expires_at DOUBLE PRECISION NOT NULL,
    execution TEXT,
    result {json},
    created_at DOUBLE PRECISION NOT NULL
);
CREATE UNIQUE INDEX approvals_run_call ON approvals (run_id, call_id);
CREATE INDEX approvals_status_expires ON approvals (status, expires_at);
CREATE INDEX approvals_waits_on ON approvals (waits_on);
CREATE TABLE approval_grants (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE UNIQUE INDEX approval_grants_key ON approval_grants (agent_id, scope, scope_id, tool)

-- migration: 20
-- Attachments (docs/attachments.md): a file's bytes kept once, by their sha256, however many
-- messages name it (ten agents sent it, a thousand threads keep it); any process of either
-- back end loads them for a request. Each message that names one is a row of
-- attachment_uses, so a thread's deletion drops its uses and then the files no other message
-- names.
CREATE TABLE attachments (
    sha256 TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    width INTEGER,
    height INTEGER,
    pages INTEGER,
    data {blob} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE attachment_uses (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq, sha256)
);
CREATE INDEX attachment_uses_sha256 ON attachment_uses (sha256)

-- migration: 21
-- A channel or DM message may carry files (docs/attachments.md): their references (name,
-- type, size, digest, pixels or pages; never the bytes, which are rows of `attachments`),
-- as a JSON list. A message without files keeps NULL.
ALTER TABLE channel_messages ADD COLUMN attachments {json}

-- migration: 22
-- Schedules (docs/schedules.md). A schedule's cursor is the newest tick decided (fired,
-- skipped, or passed while it was paused), in milliseconds since the epoch; a process moves it
-- only from where it found it (a guarded update), in the transaction that writes the ticks'
-- fires and queues their runs, so however many processes look, a tick is decided once. Each
-- tick decided is a row of schedule_fires, unique by schedule and tick: what it queued (its
-- run, whose status is the fire's outcome) or why it was skipped.
CREATE TABLE schedule_state (
    name TEXT PRIMARY KEY,
    cursor_ms BIGINT NOT NULL,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE schedule_fires (
    schedule TEXT NOT NULL,
    tick_ms BIGINT NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT,
    run_id TEXT,
    missed INTEGER NOT NULL DEFAULT 0,
    fired_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (schedule, tick_ms)
);
CREATE INDEX schedule_fires_run ON schedule_fires (run_id)

-- migration: 23
-- The fires in the order they were committed (GET /schedules/events, feeds.ScheduleFeed):
-- each fire's feed key, written by its insert (`{next_fire_key}`, store/sql.py): on
-- PostgreSQL the id of the transaction that wrote it, on SQLite one more than the largest. A
-- reader gives a fire only once every fire with a smaller key is committed or never will be,
-- so a position (key, schedule, tick) is exact. Fires written before this migration have key
-- 0, in the order of their schedules and ticks.
ALTER TABLE schedule_fires ADD COLUMN feed_key BIGINT NOT NULL DEFAULT 0;
CREATE INDEX schedule_fires_feed ON schedule_fires (feed_key, schedule, tick_ms)

-- migration: 24
-- A thread forked from another (docs/threads.md): the thread it was cut from and the last of
-- that thread's messages it began with. Not parent_thread_id, which makes a delegation's
-- thread its caller's (deleted with it); a fork outlives its parent.
ALTER TABLE threads ADD COLUMN forked_from TEXT;
ALTER TABLE threads ADD COLUMN forked_at INTEGER

-- migration: 25
-- Evals (docs/evals.md): each `agentrunner eval` is an eval run, written as it starts
-- (`running`) and settled as it ends (`completed` or `cancelled`, whether it passed, and each
-- variant's totals as JSON: a model, an agent, a version of its file). Each case's outcome is
-- a row of eval_cases as it ends, with the run that answered it (an ordinary run, opened with
-- `runs show`), so an eval stopped halfway keeps what it learnt.
CREATE TABLE eval_runs (
    id TEXT PRIMARY KEY,
    eval TEXT NOT NULL,
    agent TEXT NOT NULL,
    file TEXT NOT NULL,
    status TEXT NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,
    repeats INTEGER NOT NULL,
    passed BOOLEAN,
    variants {json},
    judge_cost_micros BIGINT NOT NULL DEFAULT 0,
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION
);
CREATE INDEX eval_runs_eval ON eval_runs (eval, started_at);
CREATE TABLE eval_cases (
    eval_run_id TEXT NOT NULL,
    variant INTEGER NOT NULL,
    name TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    position INTEGER NOT NULL,
    run_id TEXT,
    passed BOOLEAN NOT NULL,
    checks {json} NOT NULL,
    error TEXT,
    cost_micros BIGINT,
    judge_cost_micros BIGINT NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL,
    seconds DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (eval_run_id, variant, name, repeat)
);
CREATE INDEX eval_cases_run ON eval_cases (run_id)

-- migration: 26
-- Recall (docs/recall.md): each message of a settled run that says something (a person's, an
-- agent's answer), embedded after the run by the [embeddings] model, with the agent whose run
-- wrote it, so that `recall` reads only its caller's own. Vectors are float32 bytes (the
-- layout sqlite-vec reads). A thread's cursor is the last of its messages looked at, embedded
-- or not: what a failed request left is taken up by the thread's next run.
CREATE TABLE message_embeddings (
    thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    model TEXT NOT NULL,
    vector {blob} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE INDEX message_embeddings_agent ON message_embeddings (agent_id, model);
CREATE TABLE thread_embedded (
    thread_id TEXT PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    through_seq INTEGER NOT NULL
)

-- migration: 27
-- What a worker's store pool may open on PostgreSQL (NULL: SQLite, or a worker from before):
-- what `status` says it holds, its listener one more.
ALTER TABLE workers ADD COLUMN pool_size INTEGER

-- migration: 28
-- Each UTC day's spend per agent and model, added to in the transaction that writes each cost
-- row: what every report and budget check reads. Summing the cost rows themselves made the
-- costs page and the team page grow with history (60 ms and 26 ms at 33,000 runs, from 2 ms),
-- and cost_days (migration 7) kept only the money; this keeps every figure a report shows.
CREATE TABLE cost_totals (
    day TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    model TEXT NOT NULL,
    requests BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    cost_micros BIGINT NOT NULL,
    unknown BIGINT NOT NULL,
    priced_cache_read_tokens BIGINT NOT NULL,
    priced_cache_write_tokens BIGINT NOT NULL,
    PRIMARY KEY (day, agent_id, model)
){clustered};
INSERT INTO cost_totals (day, agent_id, model, requests, input_tokens, output_tokens,
                         cache_read_tokens, cache_write_tokens, cost_micros, unknown,
                         priced_cache_read_tokens, priced_cache_write_tokens)
SELECT day, agent_id, model, COUNT(*), SUM(input_tokens), SUM(output_tokens),
       SUM(cache_read_tokens), SUM(cache_write_tokens), COALESCE(SUM(cost_micros), 0),
       SUM(CASE WHEN cost_micros IS NULL THEN 1 ELSE 0 END),
       SUM(CASE WHEN cost_micros IS NULL THEN 0 ELSE cache_read_tokens END),
       SUM(CASE WHEN cost_micros IS NULL THEN 0 ELSE cache_write_tokens END)
FROM costs GROUP BY day, agent_id, model;
DROP TABLE cost_days

-- migration: 29
-- [retention] (docs/retention.md): the settled runs in the order they settled, what each rule
-- walks in small batches; what was removed of a run; and how far each rule has come ('pass': which process is applying
-- them, until when), so that a pass reads only what settled since the last one.
CREATE INDEX runs_settled ON runs (completed_at, id) WHERE completed_at IS NOT NULL;
-- What the rules removed of a run that stays (events, run_messages, token_deltas), so that what
-- shows it says so rather than nothing.
ALTER TABLE runs ADD COLUMN pruned TEXT;
CREATE TABLE retention_state (
    rule TEXT PRIMARY KEY,
    through_at DOUBLE PRECISION NOT NULL,
    through_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
)
