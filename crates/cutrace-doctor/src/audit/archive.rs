//! The members of a Unix `ar` archive (`libcupti_static.a`): their names and where their bytes
//! are, read header by header (System V/GNU long names through the `//` member, BSD `#1/N`
//! names). Member data is not read here; the caller reads the ELF members it cares about.

use std::io::{Read, Seek, SeekFrom};

pub const MAGIC: &[u8; 8] = b"!<arch>\n";
const HEADER: usize = 60;
/// A long-name table larger than this is not a real archive's.
const MAX_NAMES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// Where the member's data starts in the archive, and its length.
    pub offset: u64,
    pub size: u64,
}

/// Why the member list could not be read: the stream failed (an I/O error worth reporting), or
/// the bytes are not an archive.
#[derive(Debug)]
pub enum ArchiveError {
    Io(std::io::Error),
    Malformed(String),
}

impl From<std::io::Error> for ArchiveError {
    fn from(e: std::io::Error) -> Self {
        ArchiveError::Io(e)
    }
}

fn field(h: &[u8], r: std::ops::Range<usize>) -> &str {
    std::str::from_utf8(&h[r])
        .unwrap_or("")
        .trim_end_matches(' ')
}

/// Lists the members of the archive `r` (positioned anywhere; it starts from 0), the symbol
/// index (`/`, `/SYM64/`, `__.SYMDEF`) and the long-name table left out.
pub fn members<R: Read + Seek + ?Sized>(r: &mut R) -> Result<Vec<Member>, ArchiveError> {
    let len = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(ArchiveError::Malformed("no ar magic".into()));
    }
    let mut pos = 8u64;
    let mut long_names: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    while pos + HEADER as u64 <= len {
        r.seek(SeekFrom::Start(pos))?;
        let mut h = [0u8; HEADER];
        r.read_exact(&mut h)?;
        if &h[58..60] != b"`\n" {
            return Err(ArchiveError::Malformed(format!(
                "bad member header at byte {pos}"
            )));
        }
        let size: u64 = field(&h, 48..58)
            .parse()
            .map_err(|_| ArchiveError::Malformed(format!("bad member size at byte {pos}")))?;
        let mut data = pos + HEADER as u64;
        if data + size > len {
            return Err(ArchiveError::Malformed(format!(
                "member at byte {pos} runs past the end"
            )));
        }
        let mut size_left = size;
        let raw = field(&h, 0..16);
        let name = if raw == "/" || raw == "/SYM64/" || raw.starts_with("__.SYMDEF") {
            None
        } else if raw == "//" {
            if size > MAX_NAMES {
                return Err(ArchiveError::Malformed("long-name table too large".into()));
            }
            long_names = vec![0; size as usize];
            r.read_exact(&mut long_names)?;
            None
        } else if let Some(n) = raw.strip_prefix("#1/") {
            // BSD: the name is the first N bytes of the data.
            let n: u64 = n
                .parse()
                .map_err(|_| ArchiveError::Malformed(format!("bad BSD name at byte {pos}")))?;
            if n > size {
                return Err(ArchiveError::Malformed(format!(
                    "bad BSD name at byte {pos}"
                )));
            }
            let mut name = vec![0; n as usize];
            r.read_exact(&mut name)?;
            data += n;
            size_left -= n;
            Some(
                String::from_utf8_lossy(&name)
                    .trim_end_matches('\0')
                    .to_owned(),
            )
        } else if let Some(off) = raw.strip_prefix('/').and_then(|o| o.parse::<usize>().ok()) {
            let rest = long_names.get(off..).unwrap_or_default();
            let end = rest
                .iter()
                .position(|&b| b == b'\n' || b == 0)
                .unwrap_or(rest.len());
            let name = String::from_utf8_lossy(&rest[..end]);
            Some(name.trim_end_matches('/').to_owned())
        } else {
            Some(raw.trim_end_matches('/').to_owned())
        };
        if let Some(name) = name {
            out.push(Member {
                name,
                offset: data,
                size: size_left,
            });
        }
        pos += HEADER as u64 + size + (size & 1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn header(name: &str, size: usize) -> Vec<u8> {
        let mut h = format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}", 0, 0, 0, 644).into_bytes();
        h.extend_from_slice(b"`\n");
        assert_eq!(h.len(), HEADER);
        h
    }

    #[test]
    fn gnu_long_names_bsd_names_and_padding() {
        let mut a = MAGIC.to_vec();
        a.extend(header("/", 4));
        a.extend([0, 0, 0, 0]);
        let names = b"a_rather_long_member_name.o/\n";
        a.extend(header("//", names.len()));
        a.extend(names);
        a.push(b'\n'); // odd size: padded
        a.extend(header("short.o/", 3));
        a.extend(b"abc\n");
        a.extend(header("/0", 2));
        a.extend(b"xy");
        a.extend(header("#1/8", 8 + 1));
        a.extend(b"bsd.o\0\0\0z\n");
        let m = members(&mut Cursor::new(&a)).unwrap();
        let got: Vec<(&str, u64)> = m.iter().map(|m| (m.name.as_str(), m.size)).collect();
        assert_eq!(
            got,
            [
                ("short.o", 3),
                ("a_rather_long_member_name.o", 2),
                ("bsd.o", 1)
            ]
        );
        assert_eq!(&a[m[0].offset as usize..][..3], b"abc");
        assert_eq!(&a[m[1].offset as usize..][..2], b"xy");
        assert_eq!(a[m[2].offset as usize], b'z');
    }

    #[test]
    fn truncated_archives_are_malformed_not_io_errors() {
        let mut a = MAGIC.to_vec();
        a.extend(header("x.o/", 100));
        a.extend(b"short");
        assert!(matches!(
            members(&mut Cursor::new(&a)),
            Err(ArchiveError::Malformed(_))
        ));
    }
}
