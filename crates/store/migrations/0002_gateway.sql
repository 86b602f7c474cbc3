-- The tool gateway: its sessions and the ledger of every tool call.
--
-- Sessions are marked closed rather than deleted, so ledger rows always name a known
-- session. The ledger is append-only: rows are inserted and never updated; `seq` is the
-- line number of the same record in the hash-chained JSONL file of the data directory.

CREATE TABLE gateway_sessions (
    id              TEXT    NOT NULL PRIMARY KEY,
    sandbox_id      TEXT    NOT NULL,
    owns_sandbox    BOOLEAN NOT NULL,
    policy          TEXT    NOT NULL,  -- JSON, the effective policy
    created_at_ms   BIGINT  NOT NULL,
    expires_at_ms   BIGINT  NOT NULL,
    closed_at_ms    BIGINT,
    close_reason    TEXT
);

-- The reaper's question: which open sessions have expired?
CREATE INDEX gateway_sessions_open_expiry ON gateway_sessions (closed_at_ms, expires_at_ms);

CREATE TABLE gateway_ledger (
    seq             BIGINT  NOT NULL PRIMARY KEY,
    ts_ms           BIGINT  NOT NULL,
    session_id      TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    arguments       TEXT    NOT NULL,  -- JSON, secrets redacted
    decision        TEXT,              -- allow | ask | deny; NULL when validation failed
    rule            TEXT,
    reason          TEXT,
    outcome         TEXT    NOT NULL,  -- ok | failed | invalid | denied | pending
    summary         TEXT    NOT NULL,  -- JSON
    duration_us     BIGINT  NOT NULL,
    idempotency_key TEXT,
    reply           TEXT    NOT NULL,  -- JSON, the whole (redacted) reply, for idempotent replays
    hash            TEXT    NOT NULL   -- sha256 of the JSONL line
);

CREATE INDEX gateway_ledger_session ON gateway_ledger (session_id, seq);
CREATE UNIQUE INDEX gateway_ledger_idempotency ON gateway_ledger (session_id, idempotency_key);
