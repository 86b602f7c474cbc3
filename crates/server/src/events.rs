//! Events, the exec log and the connection log: written to the store by one writer task, in order, off the
//! request's path (a request never waits for them), then broadcast to live subscribers
//! with the monotonic id the store gave them. `/events` replays from the store after
//! `Last-Event-ID` and then follows the broadcast, so a client that reconnects misses nothing.

use forge_store::{ConnectionRecord, EventRecord, NewEvent, NewExec, Store};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::time::now_ms;

/// Live subscribers that fall this far behind skip ahead (and can replay from the store).
const BACKLOG: usize = 1024;

#[derive(Debug)]
enum Record {
    Event(NewEvent),
    Exec(NewExec),
    Connection(ConnectionRecord),
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
        let _ = self.writer.send(Record::Event(event));
    }

    /// Queues a finished command for the exec log.
    pub fn log_exec(&self, entry: NewExec) {
        let _ = self.writer.send(Record::Exec(entry));
    }

    /// Queues a sandbox's connection attempt for the connection log and the event stream
    /// (`sandbox.connection`).
    pub fn log_connection(&self, connection: ConnectionRecord) {
        let _ = self.writer.send(Record::Connection(connection));
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

async fn write(
    store: Store,
    live: broadcast::Sender<EventRecord>,
    mut queue: mpsc::UnboundedReceiver<Record>,
) {
    while let Some(record) = queue.recv().await {
        match record {
            Record::Event(event) => match store.append_event(&event).await {
                Ok(stored) => {
                    let _ = live.send(stored);
                }
                Err(err) => {
                    tracing::error!(error = %crate::error::chain(&err), kind = event.kind, "cannot record an event");
                }
            },
            Record::Exec(entry) => {
                if let Err(err) = store.record_exec(&entry).await {
                    tracing::error!(error = %crate::error::chain(&err), "cannot record an exec");
                }
            }
            Record::Connection(connection) => {
                if let Err(err) = store.record_connection(&connection).await {
                    tracing::error!(error = %crate::error::chain(&err), "cannot record a connection");
                }
                let event = NewEvent {
                    kind: "sandbox.connection".to_owned(),
                    sandbox_id: Some(connection.sandbox_id.clone()),
                    timestamp_ms: connection.started_at_ms,
                    data: serde_json::to_value(crate::wire::Connection::from(connection)).ok(),
                };
                match store.append_event(&event).await {
                    Ok(stored) => {
                        let _ = live.send(stored);
                    }
                    Err(err) => {
                        tracing::error!(error = %crate::error::chain(&err), "cannot record an event");
                    }
                }
            }
            Record::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
