//! The PostgreSQL schema.
//!
//! # Schema (version 2, created and migrated by the service itself; see `MIGRATIONS`)
//! | table           | primary key                          | holds                                   |
//! |-----------------|--------------------------------------|-----------------------------------------|
//! | `sessions`      | app, user, session                   | incarnation, times, `last_sequence`     |
//! | `session_state` | app, user, session, key              | JSON value text                         |
//! | `user_state`    | app, user, key, version              | JSON value text (newest version wins)   |
//! | `app_state`     | app, key, version                    | JSON value text (newest version wins)   |
//! | `events`        | app, user, session, sequence         | event id (unique per session), time, encoded `Event` |
//! | `changes`       | app, position                        | which event: the WatchEvents feed       |
//! | `change_trims`  | app                                  | the highest position trimmed            |
//!
//! Identifiers use the `C` collation, so listings sort by bytes exactly as the sled store does,
//! and page tokens (`store/token.rs`) are the same on both stores. Every table's key starts
//! with the app, so a distributed engine can shard by it (see the README).
//!

/// The channel appends and deletions are announced on: one per schema, so deployments that
/// share a database in separate schemas do not hear each other (a name is at most 63 bytes).
pub(super) const CHANNEL_SQL: &str = "SELECT 'adk_sessions_' || left(md5(current_schema()), 16)";

/// Schema versions, oldest first; each runs once, in a transaction.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE SEQUENCE session_incarnations;
CREATE TABLE sessions (
    app_name      text COLLATE "C" NOT NULL,
    user_id       text COLLATE "C" NOT NULL,
    session_id    text COLLATE "C" NOT NULL,
    incarnation   bigint NOT NULL,
    create_s      bigint NOT NULL,
    create_n      integer NOT NULL,
    update_s      bigint NOT NULL,
    update_n      integer NOT NULL,
    expire_s      bigint,
    expire_n      integer,
    last_sequence bigint NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id)
);
CREATE INDEX sessions_by_time ON sessions (app_name, update_s, update_n, user_id, session_id);
CREATE INDEX sessions_by_user_time ON sessions (app_name, user_id, update_s, update_n, session_id);
CREATE INDEX sessions_by_expiry ON sessions (expire_s, expire_n) WHERE expire_s IS NOT NULL;
CREATE TABLE session_state (
    app_name   text COLLATE "C" NOT NULL,
    user_id    text COLLATE "C" NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      text NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, key)
);
CREATE TABLE user_state (
    app_name text COLLATE "C" NOT NULL,
    user_id  text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    value    text NOT NULL,
    PRIMARY KEY (app_name, user_id, key)
);
CREATE TABLE app_state (
    app_name text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    value    text NOT NULL,
    PRIMARY KEY (app_name, key)
);
CREATE TABLE events (
    app_name    text COLLATE "C" NOT NULL,
    user_id     text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    sequence    bigint NOT NULL,
    incarnation bigint NOT NULL,
    event_id    text COLLATE "C" NOT NULL,
    ts_s        bigint NOT NULL,
    ts_n        integer NOT NULL,
    body        bytea NOT NULL,
    PRIMARY KEY (app_name, user_id, session_id, sequence)
);
CREATE UNIQUE INDEX events_by_id ON events (app_name, user_id, session_id, event_id);
CREATE TABLE changes (
    app_name    text COLLATE "C" NOT NULL,
    position    bigint NOT NULL,
    user_id     text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    incarnation bigint NOT NULL,
    sequence    bigint NOT NULL,
    commit_s    bigint NOT NULL,
    commit_n    integer NOT NULL,
    PRIMARY KEY (app_name, position)
);
CREATE INDEX changes_by_time ON changes (commit_s, commit_n);
CREATE TABLE change_trims (
    app_name text COLLATE "C" PRIMARY KEY,
    trimmed  bigint NOT NULL
);
"#,
    VERSIONED_STATE,
];

/// Version 2: `user_state` and `app_state` keep versions of a key instead of one row updated in
/// place (see "Shared state" in the store's module docs). Rows written before it become
/// version 0, older than any new one.
const VERSIONED_STATE: &str = "
CREATE SEQUENCE state_versions;
ALTER TABLE user_state ADD COLUMN version bigint NOT NULL DEFAULT 0;
ALTER TABLE user_state ALTER COLUMN version DROP DEFAULT;
ALTER TABLE user_state DROP CONSTRAINT user_state_pkey;
ALTER TABLE user_state ADD PRIMARY KEY (app_name, user_id, key, version);
ALTER TABLE app_state ADD COLUMN version bigint NOT NULL DEFAULT 0;
ALTER TABLE app_state ALTER COLUMN version DROP DEFAULT;
ALTER TABLE app_state DROP CONSTRAINT app_state_pkey;
ALTER TABLE app_state ADD PRIMARY KEY (app_name, key, version);
";
