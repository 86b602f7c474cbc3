//! Events, the exec log and the connection log: written to the store by one writer task, in order, off the
//! request's path (a request never waits for them), a batch of whatever is queued per
//! transaction, then broadcast to live subscribers
//! with the monotonic id the store gave them. `/events` replays from the store after
//! `Last-Event-ID` and then follows the broadcast, so a client that reconnects misses nothing.

use forge_store::{ConnectionRecord, EventRecord, JournalEntry, NewEvent, NewExec, Store};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::time::now_ms;

/// Live subscribers that fall this far behind skip ahead (and can replay from the store).
const BACKLOG: usize = 1024;

/// Most records committed in one transaction: enough to absorb a burst from 50 clients,
/// small enough that a transaction stays short.
const BATCH: usize = 256;

#[derive(Debug)]
enum Record {
    Entry(JournalEntry),
    Flush(oneshot::Sender<()>),
}

#[derive(Debug, Clone)]
pub struct EventBus {
    store: Store,
    live: broadcast::Sender<EventRecord>,
    writer: mpsc::UnboundedSender<Record>,
}

impl EventBus {
    /// Starts the writer task; must be called within a tokio runtime.
    pub fn new(store: Store) -> Self {
        let (live, _) = broadcast::channel(BACKLOG);
        let (writer, queue) = mpsc::unbounded_channel();
        tokio::spawn(write(store.clone(), live.clone(), queue));
        Self {
            store,
            live,
            writer,
        }
    }

    /// Queues an event for recording and broadcast.
    pub fn publish(&self, kind: &str, sandbox_id: Option<&str>, data: Option<serde_json::Value>) {
        let event = NewEvent {
            kind: kind.to_owned(),
            sandbox_id: sandbox_id.map(str::to_owned),
            timestamp_ms: now_ms(),
            data,
        };
        let _ = self.writer.send(Record::Entry(JournalEntry::Event(event)));
    }

    /// Queues a finished command for the exec log.
    pub fn log_exec(&self, entry: NewExec) {
        let _ = self.writer.send(Record::Entry(JournalEntry::Exec(entry)));
    }

    /// Queues a sandbox's connection attempt for the connection log and the event stream
    /// (`sandbox.connection`), committed together.
    pub fn log_connection(&self, connection: ConnectionRecord) {
        let event = NewEvent {
            kind: "sandbox.connection".to_owned(),
            sandbox_id: Some(connection.sandbox_id.clone()),
            timestamp_ms: connection.started_at_ms,
            data: serde_json::to_value(crate::wire::Connection::from(connection.clone())).ok(),
        };
        let _ = self
            .writer
            .send(Record::Entry(JournalEntry::Connection(connection)));
        let _ = self.writer.send(Record::Entry(JournalEntry::Event(event)));
    }

    /// Waits until everything queued so far is written.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.writer.send(Record::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<EventRecord> {
        self.live.subscribe()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// Drains the queue: each wake-up commits everything queued so far (up to [`BATCH`]) in one
/// transaction, so the store's cost per request falls as the load rises. Flushes are
/// answered after the records queued before them are written.
async fn write(
    store: Store,
    live: broadcast::Sender<EventRecord>,
    mut queue: mpsc::UnboundedReceiver<Record>,
) {
    let mut taken = Vec::with_capacity(BATCH);
    let mut entries = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut taken, BATCH).await > 0 {
        let mut flushes = Vec::new();
        for record in taken.drain(..) {
            match record {
                Record::Entry(entry) => entries.push(entry),
                Record::Flush(done) => flushes.push(done),
            }
        }
        if !entries.is_empty() {
            commit(&store, &live, &entries).await;
            entries.clear();
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// Commits a batch; if the batch fails, retries its records one by one so that one bad
/// record costs only itself.
async fn commit(store: &Store, live: &broadcast::Sender<EventRecord>, entries: &[JournalEntry]) {
    match store.append_journal(entries).await {
        Ok(events) => {
            for event in events {
                let _ = live.send(event);
            }
        }
        Err(err) if entries.len() == 1 => {
            let what = match &entries[0] {
                JournalEntry::Event(event) => event.kind.as_str(),
                JournalEntry::Exec(_) => "exec",
                JournalEntry::Connection(_) => "connection",
            };
            tracing::error!(error = %crate::error::chain(&err), record = what, "cannot record");
        }
        Err(err) => {
            tracing::warn!(error = %crate::error::chain(&err), records = entries.len(), "a journal batch failed; writing its records one by one");
            for entry in entries {
                Box::pin(commit(store, live, std::slice::from_ref(entry))).await;
            }
        }
    }
}
