-- The connection log: every outbound connection attempt of a sandbox's egress proxy,
-- allowed or refused, append-only.
CREATE TABLE connection_log (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id    TEXT    NOT NULL,
    started_at_ms BIGINT  NOT NULL,
    kind          TEXT    NOT NULL,  -- connect | http
    host          TEXT    NOT NULL,
    port          BIGINT  NOT NULL,
    address       TEXT,
    verdict       TEXT    NOT NULL,  -- allowed | refused
    reason        TEXT,
    bytes_up      BIGINT  NOT NULL,
    bytes_down    BIGINT  NOT NULL,
    duration_ms   BIGINT  NOT NULL
);

CREATE INDEX connection_log_sandbox ON connection_log (sandbox_id, id);
