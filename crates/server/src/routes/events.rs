//! `/events`: Server-Sent Events with monotonic ids; a reconnecting client sends
//! `Last-Event-ID` and gets everything it missed from the store before live events.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use forge_store::EventRecord;
use futures::Stream;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;
use crate::error::ApiError;
use crate::time::rfc3339;
use crate::wire;

/// Events replayed per store query.
const REPLAY_PAGE: i64 = 500;

#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    /// Same as the `Last-Event-ID` header (for clients that cannot set headers).
    last_event_id: Option<i64>,
}

fn to_sse(record: &EventRecord) -> Event {
    let event = wire::Event {
        id: record.id.to_string(),
        kind: record.kind.clone(),
        sandbox_id: record.sandbox_id.clone(),
        timestamp: rfc3339(record.timestamp_ms),
        data: record.data.clone(),
    };
    Event::default()
        .id(record.id.to_string())
        .data(serde_json::to_string(&event).unwrap_or_default())
}

/// A stream of events (`text/event-stream`). It is never cut by a server timeout.
#[utoipa::path(get, path = "/events", tag = "system", params(("Last-Event-ID" = Option<i64>, Header), ("last_event_id" = Option<i64>, Query)),
    responses((status = 200, content_type = "text/event-stream", body = wire::Event)))]
pub(crate) async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let header_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let resume = header_id.or(query.last_event_id);
    // Subscribe before reading the store so that nothing falls between replay and live.
    let mut live = state.manager().events().subscribe();
    let store = state.manager().store().clone();
    let mut last = match resume {
        Some(id) => id,
        None => store.last_event_id().await?,
    };
    let stream = async_stream::stream! {
        loop {
            let Ok(page) = store.events_after(last, REPLAY_PAGE).await else { break };
            let full = i64::try_from(page.len()).is_ok_and(|n| n == REPLAY_PAGE);
            for record in &page {
                last = record.id;
                yield Ok(to_sse(record));
            }
            if !full {
                break;
            }
        }
        loop {
            match live.recv().await {
                Ok(record) if record.id > last => {
                    last = record.id;
                    yield Ok(to_sse(&record));
                }
                Ok(_) => {}
                // Fell behind the broadcast: catch up from the store.
                Err(RecvError::Lagged(_)) => {
                    if let Ok(page) = store.events_after(last, REPLAY_PAGE).await {
                        for record in &page {
                            last = record.id;
                            yield Ok(to_sse(record));
                        }
                    }
                }
                Err(RecvError::Closed) => break,
            }
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
