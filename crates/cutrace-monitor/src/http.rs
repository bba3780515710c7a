//! A small HTTP/1.0-style server for `GET /metrics`: one short-lived thread per connection, at
//! most [`MAX_CONNECTIONS`] at once, each request read within [`REQUEST_TIMEOUT`] and
//! [`MAX_REQUEST_BYTES`]; every response closes its connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 32;
/// Bytes of a request's head read at most.
pub const MAX_REQUEST_BYTES: usize = 8192;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(
        "cannot listen on {addr}: the address is in use (another cutrace monitor, a Prometheus \
         exporter such as node_exporter on 9100 or a second monitor on 9464?). Fix: pass \
         --listen 127.0.0.1:PORT with a free port, or stop what holds it (`ss -ltnp 'sport = \
         :{port}'` names it)",
        port = addr.port()
    )]
    InUse { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Other {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Binds `addr`, with the fix in the error when it is taken.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            ListenError::InUse { addr }
        } else {
            ListenError::Other { addr, source: e }
        }
    })
}

/// What a request gets: the status line's code and reason, the content type and the body.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// Answers one request line (`GET /metrics HTTP/1.1`); `metrics` renders the body of
/// `/metrics`.
pub fn answer(request_line: &str, metrics: &dyn Fn() -> String) -> Response {
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let text = |status, body: &str| Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.to_string(),
    };
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => Response {
            status: 200,
            content_type: crate::prom::CONTENT_TYPE,
            body: metrics(),
        },
        ("GET" | "HEAD", "/") => text(
            200,
            "cutrace monitor: Prometheus metrics at /metrics (docs/MONITOR.md)\n",
        ),
        ("GET" | "HEAD", _) => text(404, "not found: the metrics are at /metrics\n"),
        _ => text(405, "only GET /metrics is served\n"),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn write_response(s: &mut TcpStream, r: &Response, head_only: bool) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    s.write_all(head.as_bytes())?;
    if !head_only {
        s.write_all(r.body.as_bytes())?;
    }
    s.flush()
}

/// Reads a request's head (up to the blank line) within the limits; its first line.
fn read_request_line(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        if buf.len() >= MAX_REQUEST_BYTES {
            return None;
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n.min(MAX_REQUEST_BYTES - buf.len())]),
            Err(_) => return None,
        }
    }
    let line = buf.split(|&b| b == b'\n').next()?;
    Some(String::from_utf8_lossy(line).trim_end().to_string())
}

fn serve_one(mut s: TcpStream, metrics: &dyn Fn() -> String) {
    let _ = s.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = s.set_write_timeout(Some(REQUEST_TIMEOUT));
    let (r, head_only) = match read_request_line(&mut s) {
        Some(line) => (answer(&line, metrics), line.starts_with("HEAD ")),
        None => (
            Response {
                status: 400,
                content_type: "text/plain; charset=utf-8",
                body: "bad request\n".into(),
            },
            false,
        ),
    };
    let _ = write_response(&mut s, &r, head_only);
}

/// Serves `listener` for ever (until the process exits), each request on a thread of its own.
pub fn serve(listener: TcpListener, metrics: Arc<dyn Fn() -> String + Send + Sync>) {
    let busy = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(mut s) = conn else {
            // Out of descriptors (EMFILE) and the like: let them free up rather than spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            busy.fetch_sub(1, Ordering::SeqCst);
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let r = Response {
                status: 503,
                content_type: "text/plain; charset=utf-8",
                body: "too many connections\n".into(),
            };
            let _ = write_response(&mut s, &r, false);
            continue;
        }
        let (busy2, metrics) = (busy.clone(), metrics.clone());
        let spawned = std::thread::Builder::new()
            .name("cutrace-http".into())
            .spawn(move || {
                serve_one(s, &*metrics);
                busy2.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            busy.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_gets_the_metrics() {
        let m = || "x 1\n".to_string();
        let r = answer("GET /metrics HTTP/1.1", &m);
        assert_eq!((r.status, r.body.as_str()), (200, "x 1\n"));
        assert_eq!(answer("GET /metrics?x=1 HTTP/1.1", &m).status, 200);
        assert_eq!(answer("GET /other HTTP/1.1", &m).status, 404);
        assert_eq!(answer("POST /metrics HTTP/1.1", &m).status, 405);
        assert_eq!(answer("", &m).status, 405);
    }

    #[test]
    fn a_taken_port_is_named_with_the_fix() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let e = bind(addr).unwrap_err().to_string();
        assert!(
            e.contains(&addr.to_string()) && e.contains("--listen"),
            "{e}"
        );
    }

    #[test]
    fn the_server_answers_over_tcp() {
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || serve(l, Arc::new(|| "m 2\n".to_string())));
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
        assert!(got.ends_with("\r\n\r\nm 2\n"), "{got}");
    }
}
