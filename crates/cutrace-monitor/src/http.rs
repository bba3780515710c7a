//! A small HTTP/1.0-style server for `GET /metrics`: one short-lived thread per connection, at
//! most [`MAX_CONNECTIONS`] at once, each request read within [`REQUEST_TIMEOUT`] and
//! [`MAX_REQUEST_BYTES`] and its response written within [`RESPONSE_TIMEOUT`] (deadlines for
//! the whole exchange, not per read); every response closes its connection. On loopback a
//! request must name an IP address or `localhost` as its host ([`loopback_host_ok`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::deadline::Deadline;

/// Connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 32;
/// Bytes of a request's head read at most.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// The time a request's head has to arrive, whole.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The time a response has to be taken, whole.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

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
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn write_response(s: &mut impl Write, r: &Response, head_only: bool) -> std::io::Result<()> {
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

/// Reads a request's head (up to the blank line) within the limits.
fn read_head(s: &mut impl Read) -> Option<String> {
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
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The value of the head's `Host` header, if it has one.
fn host_header(head: &str) -> Option<&str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("host").then(|| v.trim())
    })
}

/// Whether a request naming `host` may read a server on loopback: an IP address or
/// `localhost`. Any other name reached a loopback server through a DNS answer that points at
/// 127.0.0.1 (DNS rebinding): a web page a browser on this machine opened, reading the
/// metrics. Prometheus on the same machine names the address it scrapes, which passes.
pub fn loopback_host_ok(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => {
            return v6
                .split(']')
                .next()
                .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok())
        }
        None => host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
}

fn serve_one(s: TcpStream, metrics: &dyn Fn() -> String) {
    // Reached through loopback (also on a server bound to every address): a local browser
    // could be the client, so the Host must be one that names this machine.
    let loopback = s.local_addr().is_ok_and(|a| a.ip().is_loopback());
    // One deadline for the whole request, however slowly it trickles in, and one for the
    // response, however slowly it is taken.
    let head = read_head(&mut Deadline::new(&s, REQUEST_TIMEOUT));
    let plain = |status, body: &str| Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.to_string(),
    };
    let (r, head_only) = match &head {
        Some(h) if loopback && host_header(h).is_some_and(|v| !loopback_host_ok(v)) => (
            plain(
                403,
                "refused: this server listens on loopback and the request names another host \
                 (a web page reaching it through DNS rebinding?). Scrape it as \
                 127.0.0.1:PORT or localhost:PORT\n",
            ),
            false,
        ),
        Some(h) => {
            let line = h.lines().next().unwrap_or("").trim_end();
            (answer(line, metrics), line.starts_with("HEAD "))
        }
        None => (plain(400, "bad request\n"), false),
    };
    let _ = write_response(&mut Deadline::new(&s, RESPONSE_TIMEOUT), &r, head_only);
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
        let get = |host: &str| {
            let mut c = TcpStream::connect(addr).unwrap();
            write!(c, "GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
            let mut got = String::new();
            c.read_to_string(&mut got).unwrap();
            got
        };
        let got = get(&addr.to_string());
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
        assert!(got.ends_with("\r\n\r\nm 2\n"), "{got}");
        assert!(get(&format!("localhost:{}", addr.port())).starts_with("HTTP/1.1 200"));
        // A name that resolved to loopback through someone's DNS: a rebinding web page.
        let got = get(&format!("attacker.example:{}", addr.port()));
        assert!(got.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{got}");
        assert!(!got.contains("m 2"), "{got}");
    }

    #[test]
    fn hosts_a_loopback_server_may_be_named_by() {
        for ok in [
            "127.0.0.1:9464",
            "127.0.0.1",
            "localhost",
            "LOCALHOST.:1",
            "a.localhost:9",
            "[::1]:9464",
            "10.1.2.3:80",
        ] {
            assert!(loopback_host_ok(ok), "{ok}");
        }
        for bad in [
            "evil.com",
            "evil.com:9464",
            "127.0.0.1.nip.io",
            "[evil]:1",
            "localhost.evil.com",
        ] {
            assert!(!loopback_host_ok(bad), "{bad}");
        }
    }

    /// A request head trickled a byte at a time is answered (400) when its deadline is up,
    /// not held open by each byte.
    #[test]
    fn a_trickled_request_is_cut_off_at_its_deadline() {
        let l = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || serve(l, Arc::new(|| "m 2\n".to_string())));
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let start = std::time::Instant::now();
        let mut got = String::new();
        while start.elapsed() < REQUEST_TIMEOUT * 3 {
            if c.write_all(b"G").is_err() {
                break;
            }
            let mut buf = [0u8; 256];
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(_) => {}
            }
            if !got.is_empty() {
                break;
            }
        }
        let took = start.elapsed();
        assert!(got.starts_with("HTTP/1.1 400"), "{got:?} after {took:?}");
        assert!(took < REQUEST_TIMEOUT * 2, "{took:?}");
    }
}
