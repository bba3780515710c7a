//! The monitor's Unix socket: created in a new directory only its user can enter (0700, the
//! socket 0600), every connection's sender checked with the kernel's peer credentials
//! (SO_PEERCRED: same user, and a hello only for the sender's own pid), each connection read
//! on a thread of its own through the bounded frame reader. A connection that sends anything
//! refused is closed, and the refusal counted in the state.

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::deadline::Deadline;
use crate::peer::Peer;
use crate::state::{State, MAX_CONNECTIONS_PER_PEER};
use crate::wire::{FrameReader, Message, WireError};

/// Connections read at once; more are closed at once (and counted).
pub const MAX_CONNECTIONS: u64 = 256;
/// How long a new connection has to say hello before it is closed.
pub const HELLO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The socket's file name inside its directory.
pub const SOCKET_NAME: &str = "monitor.sock";

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("cannot create the monitor's socket directory in {base}: {source}")]
    Dir {
        base: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{0} is not a directory private to this user (a link, another user's, or open to \
         others): refused"
    )]
    NotPrivate(PathBuf),
    #[error(
        "the socket path {0} is longer than a Unix socket address holds (108 bytes). Fix: set \
         XDG_RUNTIME_DIR or TMPDIR to a shorter directory"
    )]
    TooLong(PathBuf),
    #[error(
        "another cutrace agent already serves {0}. Fix: stop it, or give this one another \
         --socket-dir"
    )]
    InUse(PathBuf),
    #[error(
        "{0} is there and is not a socket: refused, not removed. Fix: move it away, or give \
         another --socket-dir"
    )]
    NotASocket(PathBuf),
    #[error("cannot create the monitor's socket {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The socket and its private directory: the socket is removed when dropped, and the
/// directory too when this made it.
#[derive(Debug)]
pub struct PrivateSocket {
    pub dir: PathBuf,
    pub path: PathBuf,
    pub listener: UnixListener,
    made_dir: bool,
}

impl Drop for PrivateSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if self.made_dir {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Whether `dir` is a directory (not a link) of this user that no one else may enter.
fn is_private(dir: &Path) -> bool {
    is_fit(dir, None)
}

/// Whether `dir` may hold the agent's socket: a directory (not a link) of this user that no one
/// else may enter, or, shared with `group`, of that group, which may enter it but not write in it.
fn is_fit(dir: &Path, group: Option<u32>) -> bool {
    match std::fs::symlink_metadata(dir) {
        Ok(m) => {
            let mode = m.permissions().mode();
            m.is_dir()
                && m.uid() == rustix::process::getuid().as_raw()
                && match group {
                    None => mode & 0o077 == 0,
                    Some(g) => m.gid() == g && mode & 0o027 == 0,
                }
        }
        Err(_) => false,
    }
}

/// Creates a new private directory under `base` and the socket in it.
pub fn create(base: &Path) -> Result<PrivateSocket, SocketError> {
    static N: AtomicU64 = AtomicU64::new(0);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last_err = None;
    for _ in 0..100 {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!(
            "cutrace-monitor-{}-{:08x}{n}",
            std::process::id(),
            stamp ^ (n as u32).wrapping_mul(0x9e37_79b9)
        ));
        // Exclusive: a name already there (planted or not) is never used.
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return bind_in(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => {
                return Err(SocketError::Dir {
                    base: base.into(),
                    source: e,
                })
            }
        }
    }
    Err(SocketError::Dir {
        base: base.into(),
        source: last_err.unwrap_or_else(|| std::io::Error::other("no free name")),
    })
}

/// The node agent's socket directory: `cutrace-agent` in `XDG_RUNTIME_DIR` when that is an
/// absolute path, else `cutrace-agent-UID` in the temporary directory. `cutrace agent env`
/// names the socket in it, so processes started later find the agent there.
pub fn agent_dir(xdg_runtime_dir: Option<&Path>) -> PathBuf {
    match xdg_runtime_dir.filter(|p| p.is_absolute()) {
        Some(x) => x.join("cutrace-agent"),
        None => std::env::temp_dir().join(format!(
            "cutrace-agent-{}",
            rustix::process::getuid().as_raw()
        )),
    }
}

/// The agent's socket in `dir` (made 0700 when missing; refused when it is a link, another
/// user's or open to others). A socket left there by an agent that died is replaced; one that
/// still answers is another agent's, and refused.
pub fn create_at(dir: &Path) -> Result<PrivateSocket, SocketError> {
    create_shared(dir, None)
}

/// [`create_at`], the socket shared with `group` when given: the directory is then made 0750
/// of that group (and must be so when it is there), the socket 0660; [`serve`] takes that
/// group's members as senders too ([`State::group`]).
pub fn create_shared(dir: &Path, group: Option<u32>) -> Result<PrivateSocket, SocketError> {
    let made_dir = match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            if let Some(g) = group {
                share(dir, g, 0o750).map_err(|e| SocketError::Dir {
                    base: dir.into(),
                    source: e,
                })?;
            }
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => {
            return Err(SocketError::Dir {
                base: dir.into(),
                source: e,
            })
        }
    };
    if !is_fit(dir, group) {
        return Err(SocketError::NotPrivate(dir.into()));
    }
    let path = dir.join(SOCKET_NAME);
    if let Ok(m) = std::fs::symlink_metadata(&path) {
        // Only a socket is ours to replace: a file or link planted there is left alone.
        if !std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) {
            return Err(SocketError::NotASocket(path));
        }
        if UnixStream::connect(&path).is_ok() {
            return Err(SocketError::InUse(path));
        }
        let _ = std::fs::remove_file(&path);
    }
    let s = bind_socket(dir.to_path_buf(), path, made_dir)?;
    if let Some(g) = group {
        share(&s.path, g, 0o660).map_err(|e| SocketError::Bind {
            path: s.path.clone(),
            source: e,
        })?;
    }
    Ok(s)
}

/// Gives `path` (this user's, in a directory of this user's) to `group` with `mode`.
fn share(path: &Path, group: u32, mode: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, None, Some(group))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Whether `dir` is fit to hold the agent's socket: a directory (not a link) of this user that
/// no one else may enter. For `cutrace agent env`, which names the socket before any agent may
/// have made it.
pub fn check_agent_dir(dir: &Path, group: Option<u32>) -> Result<(), SocketError> {
    if is_fit(dir, group) {
        Ok(())
    } else {
        Err(SocketError::NotPrivate(dir.into()))
    }
}

/// The socket in the new private directory `dir`; the directory goes again if that fails.
fn bind_in(dir: PathBuf) -> Result<PrivateSocket, SocketError> {
    let path = dir.join(SOCKET_NAME);
    let r = if is_private(&dir) {
        bind_socket(dir.clone(), path, true)
    } else {
        Err(SocketError::NotPrivate(dir.clone()))
    };
    if r.is_err() {
        let _ = std::fs::remove_dir(&dir);
    }
    r
}

/// Binds `path` in the private `dir`, mode 0600.
fn bind_socket(dir: PathBuf, path: PathBuf, made_dir: bool) -> Result<PrivateSocket, SocketError> {
    if path.as_os_str().len() >= 108 {
        return Err(SocketError::TooLong(path));
    }
    let listener = UnixListener::bind(&path).map_err(|e| SocketError::Bind {
        path: path.clone(),
        source: e,
    })?;
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    Ok(PrivateSocket {
        dir,
        path,
        listener,
        made_dir,
    })
}

/// Connects to a monitor's socket at `path` (blocking), refused unless the listener is this
/// user's or root's: what is sent there (a capture's directory) is for no one else.
pub fn connect_checked(path: &Path) -> std::io::Result<UnixStream> {
    let s = UnixStream::connect(path)?;
    let me = rustix::process::getuid().as_raw();
    match rustix::net::sockopt::socket_peercred(&s) {
        Ok(c) if c.uid.as_raw() == me || c.uid.as_raw() == 0 => Ok(s),
        Ok(c) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is served by uid {}, not by this user",
                path.display(),
                c.uid.as_raw()
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Accepts connections for ever, each read on its own thread into `state`.
pub fn serve(listener: &UnixListener, state: Arc<Mutex<State>>) {
    let me = rustix::process::getuid().as_raw();
    for conn in listener.incoming() {
        let Ok(stream) = conn else {
            // Out of descriptors (EMFILE) and the like: let them free up rather than spin.
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        };
        let Ok(cred) = rustix::net::sockopt::socket_peercred(&stream) else {
            reject(&state, "peer_unknown");
            continue;
        };
        let group = state.lock().ok().and_then(|s| s.group);
        let member = |g: u32| {
            cred.gid.as_raw() == g
                || crate::peer::groups(Path::new("/proc"), cred.pid.as_raw_pid() as u32)
                    .contains(&g)
        };
        if cred.uid.as_raw() != me && !group.is_some_and(member) {
            reject(&state, "peer_uid");
            continue;
        }
        let pid = cred.pid.as_raw_pid() as u32;
        {
            let Ok(mut s) = state.lock() else { return };
            if s.connections_open >= MAX_CONNECTIONS {
                s.reject("too_many_connections");
                continue;
            }
            let mine = s.connections_by_peer.entry(pid).or_default();
            if *mine >= MAX_CONNECTIONS_PER_PEER {
                s.reject("too_many_connections_of_one_process");
                continue;
            }
            *mine += 1;
            s.connections_open += 1;
            s.connections_total += 1;
        }
        let st = state.clone();
        let spawned = std::thread::Builder::new()
            .name("cutrace-monitor-conn".into())
            .spawn(move || read_connection(stream, pid, cred.uid.as_raw(), &st));
        if spawned.is_err() {
            if let Ok(mut s) = state.lock() {
                s.closed(pid);
                s.reject("no_thread");
            }
        }
    }
}

fn reject(state: &Mutex<State>, reason: &'static str) {
    if let Ok(mut s) = state.lock() {
        s.reject(reason);
    }
}

/// Reads one connection's frames until it ends or sends something refused.
fn read_connection(stream: UnixStream, peer_pid: u32, uid: u32, state: &Mutex<State>) {
    // Read while the sender is surely alive (it just connected), outside the state's lock.
    let peer = Peer::read(Path::new("/proc"), peer_pid, uid);
    let mut reader = FrameReader::default();
    let mut hello = None;
    // A connection that says nothing does not keep its place: its hello, whole, within the
    // time (however it trickles in), then no limit (a process may be quiet for long).
    let mut before_hello = Deadline::new(&stream, HELLO_TIMEOUT);
    loop {
        let m = if hello.is_none() {
            reader.next(&mut before_hello)
        } else {
            reader.next(&mut &stream)
        };
        let Ok(mut s) = state.lock() else { return };
        match m {
            // `cutrace capture`, first and alone: answered, then closed.
            Ok(Some(Message::CaptureRequest(r))) if hello.is_none() => {
                let reply = s.capture(&peer, &r);
                drop(s);
                let frame = crate::wire::encode(&Message::CaptureReply(reply));
                let _ =
                    std::io::Write::write_all(&mut Deadline::new(&stream, HELLO_TIMEOUT), &frame);
                break;
            }
            Ok(Some(m)) => {
                let first = hello.is_none();
                if let Err(e) = s.apply_from(&peer, &mut hello, m) {
                    s.reject(e.reason());
                    break;
                }
                if first && hello.is_some() {
                    let _ = stream.set_read_timeout(None);
                    if let (Some(pid), Ok(w)) = (hello, stream.try_clone()) {
                        s.writers.insert(pid, w);
                    }
                }
            }
            Ok(None) => break,
            Err(WireError::Io(_)) if hello.is_none() => {
                s.reject("hello_timeout");
                break;
            }
            Err(e) => {
                s.reject(e.reason());
                break;
            }
        }
    }
    if let Ok(mut s) = state.lock() {
        s.closed(peer_pid);
        if let Some(pid) = hello {
            s.writers.remove(&pid);
            s.ended(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_says_nothing_is_closed_after_the_hello_timeout() {
        let s = create(&std::env::temp_dir()).unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let l = s.listener.try_clone().unwrap();
        let st = state.clone();
        std::thread::spawn(move || serve(&l, st));
        let mut c = UnixStream::connect(&s.path).unwrap();
        // Half a frame header, then nothing.
        std::io::Write::write_all(&mut c, b"CTMN").unwrap();
        let start = std::time::Instant::now();
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut c, &mut rest);
        let took = start.elapsed();
        assert!(
            took >= HELLO_TIMEOUT - std::time::Duration::from_millis(500),
            "{took:?}"
        );
        assert!(took < HELLO_TIMEOUT * 3, "{took:?}");
        let s = state.lock().unwrap();
        assert_eq!(s.rejected.get("hello_timeout"), Some(&1));
        assert_eq!(s.connections_open, 0);
    }

    #[test]
    fn the_socket_is_private_and_goes_away() {
        let base = std::env::temp_dir();
        let s = create(&base).unwrap();
        let dir_mode = std::fs::metadata(&s.dir).unwrap().permissions().mode() & 0o777;
        let sock_mode = std::fs::metadata(&s.path).unwrap().permissions().mode() & 0o777;
        assert_eq!((dir_mode, sock_mode), (0o700, 0o600));
        let (dir, path) = (s.dir.clone(), s.path.clone());
        drop(s);
        assert!(!path.exists() && !dir.exists());
    }

    #[test]
    fn the_agent_socket_replaces_a_dead_one_and_refuses_a_live_one() {
        let dir = std::env::temp_dir().join(format!("cutrace-agent-test-{}", std::process::id()));
        let a = create_at(&dir).unwrap();
        assert!(matches!(create_at(&dir), Err(SocketError::InUse(_))));
        drop(a);
        // An agent that died leaves its socket: the next one takes the place.
        DirBuilder::new().mode(0o700).create(&dir).unwrap();
        drop(UnixListener::bind(dir.join(SOCKET_NAME)).unwrap());
        let b = create_at(&dir).unwrap();
        drop(b);
        // The directory was there before this agent: its socket goes, the directory stays.
        assert!(dir.exists() && !dir.join(SOCKET_NAME).exists());
        // A file planted in the socket's place is refused and left as it was.
        std::fs::write(dir.join(SOCKET_NAME), b"keep").unwrap();
        assert!(matches!(create_at(&dir), Err(SocketError::NotASocket(_))));
        assert_eq!(std::fs::read(dir.join(SOCKET_NAME)).unwrap(), b"keep");
        std::fs::remove_file(dir.join(SOCKET_NAME)).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        // Made here, the directory goes with the agent.
        drop(create_at(&dir).unwrap());
        assert!(!dir.exists());
        // A directory others may enter is refused.
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(create_at(&dir), Err(SocketError::NotPrivate(_))));
        std::fs::remove_dir(&dir).unwrap();
    }

    fn serve_in_background() -> (PrivateSocket, Arc<Mutex<State>>) {
        let s = create(&std::env::temp_dir()).unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let l = s.listener.try_clone().unwrap();
        let st = state.clone();
        std::thread::spawn(move || serve(&l, st));
        (s, state)
    }

    /// A hello trickled a byte at a time, each well inside any per-read timeout, is still cut
    /// off when the hello's time is up.
    #[test]
    fn a_trickled_hello_is_cut_off_at_the_hello_deadline() {
        let (s, state) = serve_in_background();
        let c = UnixStream::connect(&s.path).unwrap();
        let start = std::time::Instant::now();
        let mut w = &c;
        // A header claiming a 1000-byte hello, then a byte every 200 ms.
        let mut head = crate::wire::MAGIC.to_vec();
        head.extend_from_slice(&crate::wire::VERSION.to_le_bytes());
        head.extend_from_slice(&1u16.to_le_bytes());
        head.extend_from_slice(&1000u32.to_le_bytes());
        std::io::Write::write_all(&mut w, &head).unwrap();
        while std::io::Write::write_all(&mut w, b"x").is_ok() {
            if start.elapsed() > HELLO_TIMEOUT * 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            if state.lock().unwrap().rejected.contains_key("hello_timeout") {
                break;
            }
        }
        let took = start.elapsed();
        assert!(took < HELLO_TIMEOUT * 2, "still open after {took:?}");
        assert_eq!(
            state.lock().unwrap().rejected.get("hello_timeout"),
            Some(&1)
        );
    }

    #[test]
    fn one_process_cannot_take_every_connection() {
        let (s, state) = serve_in_background();
        let conns: Vec<UnixStream> = (0..MAX_CONNECTIONS_PER_PEER + 2)
            .map(|_| UnixStream::connect(&s.path).unwrap())
            .collect();
        let start = std::time::Instant::now();
        loop {
            let st = state.lock().unwrap();
            let refused = st.rejected.get("too_many_connections_of_one_process");
            if refused == Some(&2) {
                assert_eq!(st.connections_open, MAX_CONNECTIONS_PER_PEER as u64);
                break;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "{:?}",
                st.rejected
            );
            drop(st);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(conns);
    }

    #[test]
    fn a_socket_shared_with_a_group_lets_it_in_but_never_write() {
        let gid = rustix::process::getgid().as_raw();
        let dir = std::env::temp_dir().join(format!("cutrace-agent-group-{}", std::process::id()));
        let s = create_shared(&dir, Some(gid)).unwrap();
        let m = std::fs::metadata(&dir).unwrap();
        assert_eq!((m.permissions().mode() & 0o777, m.gid()), (0o750, gid));
        let m = std::fs::metadata(&s.path).unwrap();
        assert_eq!((m.permissions().mode() & 0o777, m.gid()), (0o660, gid));
        assert!(check_agent_dir(&dir, Some(gid)).is_ok());
        // Not private enough without the group; refused when the group may write.
        assert!(check_agent_dir(&dir, None).is_err());
        drop(s);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(matches!(
            create_shared(&dir, Some(gid)),
            Err(SocketError::NotPrivate(_))
        ));
        std::fs::remove_dir(&dir).unwrap();
    }
}
