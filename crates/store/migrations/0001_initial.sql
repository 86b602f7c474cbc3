-- Forge's first schema: sandboxes, templates, the exec log and the event stream.
--
-- Portable on purpose: plain types, timestamps as BIGINT milliseconds since the Unix epoch,
-- JSON as TEXT, booleans as BOOLEAN (0/1 in SQLite). The one SQLite-only spelling is
-- `INTEGER PRIMARY KEY AUTOINCREMENT`, which a Postgres migration writes as
-- `BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY`.

-- One row per sandbox ever created. Destroying a sandbox marks its row instead of deleting
-- it, so the ids that exec log rows and events name always resolve.
CREATE TABLE sandboxes (
    id              TEXT    NOT NULL PRIMARY KEY,
    state           TEXT    NOT NULL,
    image           TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    memory_mb       BIGINT  NOT NULL,
    vcpus           BIGINT  NOT NULL,
    owner_id        TEXT,
    metadata        TEXT    NOT NULL,  -- JSON object of strings
    spec            TEXT    NOT NULL,  -- JSON
    template        TEXT,
    created_at_ms   BIGINT  NOT NULL,
    expires_at_ms   BIGINT  NOT NULL,
    destroyed_at_ms BIGINT,
    destroy_reason  TEXT,
    init_pid        BIGINT
);

-- The reaper's question: which live sandboxes have expired?
CREATE INDEX sandboxes_state_expiry ON sandboxes (state, expires_at_ms);

CREATE TABLE templates (
    name          TEXT   NOT NULL PRIMARY KEY,
    version       BIGINT NOT NULL,
    image         TEXT   NOT NULL,
    description   TEXT,
    setup         TEXT   NOT NULL,  -- JSON array of strings
    allowed_hosts TEXT   NOT NULL,  -- JSON array of strings
    memory_mb     BIGINT NOT NULL,
    cpu_cores     BIGINT NOT NULL,
    ttl_seconds   BIGINT NOT NULL,
    env           TEXT   NOT NULL,  -- JSON object of strings
    secrets       TEXT   NOT NULL,  -- JSON
    pool_size     BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

-- Every command run in a sandbox. No foreign key to sandboxes: the log is append-only and
-- must accept a row whatever the order in which a sandbox's row and its first exec land.
CREATE TABLE exec_log (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id    TEXT    NOT NULL,
    command       TEXT    NOT NULL,
    exit_code     BIGINT  NOT NULL,
    signal        BIGINT,
    duration_us   BIGINT  NOT NULL,
    started_at_ms BIGINT  NOT NULL,
    timed_out     BOOLEAN NOT NULL,
    oom_killed    BOOLEAN NOT NULL,
    streamed      BOOLEAN NOT NULL
);

CREATE INDEX exec_log_sandbox ON exec_log (sandbox_id, id);

-- The event stream. AUTOINCREMENT never reuses an id, so ids only grow, across restarts
-- too, and a client resumes with "everything after the last id I saw".
CREATE TABLE events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT   NOT NULL,
    sandbox_id   TEXT,
    timestamp_ms BIGINT NOT NULL,
    data         TEXT              -- JSON
);
