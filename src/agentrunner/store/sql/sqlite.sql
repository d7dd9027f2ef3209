-- SQLite versions of queries whose plan its planner gets wrong without being told.

-- name: channel_thread_replies
-- Without INDEXED BY, SQLite walks the channel's messages on the primary key (channel_id, id)
-- rather than the thread's on channel_messages_thread: every message of the channel since the
-- thread began, for a handful of replies.
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages INDEXED BY channel_messages_thread
WHERE thread_root_id = :root AND channel_id = :channel_id AND id > :after
ORDER BY id LIMIT :limit;

-- name: channel_thread_replies_newest
-- As channel_thread_replies: the thread's index, not the channel's messages.
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages INDEXED BY channel_messages_thread
WHERE thread_root_id = :root AND channel_id = :channel_id
ORDER BY id DESC LIMIT :limit;

-- name: channel_thread_replies_before
-- As channel_thread_replies.
SELECT channel_id, id, thread_root_id, sender, sender_kind, content, depth, run_id, created_at,
       attachments
FROM channel_messages INDEXED BY channel_messages_thread
WHERE thread_root_id = :root AND channel_id = :channel_id AND id < :before
ORDER BY id DESC LIMIT :limit;

-- name: channel_reply_counts
-- As channel_thread_replies: the replies to a page's messages, not the channel's messages.
SELECT thread_root_id AS root, COUNT(*) AS replies
FROM channel_messages INDEXED BY channel_messages_thread
WHERE thread_root_id >= :first AND thread_root_id <= :last AND channel_id = :channel_id
GROUP BY thread_root_id;

-- name: database_connections
-- A file has no connections to count.
SELECT NULL AS connections, NULL AS max_connections;
