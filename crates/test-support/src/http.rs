//! A tiny HTTP server that plays "the internet" for network tests: it answers every request
//! with a fixed body and counts the connections it accepted, so a test can prove that a
//! refused connection never reached it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A running server; it lives as long as the test process.
#[derive(Debug, Clone)]
pub struct TestServer {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    response_len: u64,
}

impl TestServer {
    /// Listens on `bind` (`127.0.0.2:0`) and answers `body` to every request.
    pub fn start(bind: &str, body: &str) -> Self {
        let listener = TcpListener::bind(bind)
            .unwrap_or_else(|err| panic!("cannot listen on {bind} for a test server: {err}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("test server address: {err}"));
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let response_len = response.len() as u64;
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let response = response.clone();
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let _ = stream.write_all(response.as_bytes());
                });
            }
        });
        Self {
            addr,
            hits,
            response_len,
        }
    }

    /// Bytes of each response, headers included.
    pub fn response_len(&self) -> u64 {
        self.response_len
    }

    /// Connections accepted so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}
