//! Native part inputs from the committed `.cutrace` fixtures: chunk-aware mutations whose
//! checksums still hold (row and string counts, column lengths, length fields), bombs (rows that
//! compress to nothing, strings of nothing), repeated chunks, then byte-level damage.

use std::io::{self, Read, Write};
use std::path::Path;

use cutrace_trace::varint;

use super::{case_for, fixtures, mutate, Case, Target};
use crate::rng::Rng;

const HEADER: usize = 20;

/// Native inputs stay under this. A part's records are kept, as they should be, and the readers
/// allow up to 2 rows per byte of the file (`rows-per-byte`; recorded parts hold under 0.4
/// records per byte), so a part of 512 KB may hold about 1 M records, about 50 MB: within the
/// ceiling with room for the analysis. Genuine parts of 10 MB are the `large` cases.
const MAX_PART: usize = 512 << 10;

pub struct NativePart {
    parts: Vec<(String, Vec<u8>)>,
}

impl NativePart {
    pub fn load(repo: &Path) -> io::Result<Self> {
        Ok(NativePart {
            parts: fixtures(repo, "tests/fixtures/native", ".cutrace")?,
        })
    }
}

/// A chunk as stored: tag, codec, raw (decompressed) payload.
#[derive(Clone)]
struct Chunk {
    tag: [u8; 4],
    codec: u8,
    raw: Vec<u8>,
}

fn split(b: &[u8]) -> (Vec<u8>, Vec<Chunk>) {
    let mut chunks = Vec::new();
    let mut o = 12.min(b.len());
    let pre = b[..o].to_vec();
    while o + HEADER <= b.len() {
        let stored = u32::from_le_bytes([b[o + 8], b[o + 9], b[o + 10], b[o + 11]]) as usize;
        let Some(payload) = b.get(o + HEADER..o + HEADER + stored) else {
            break;
        };
        let codec = b[o + 4];
        let raw = if codec == 1 {
            let mut out = Vec::new();
            if flate2::read::DeflateDecoder::new(payload)
                .take(64 << 20)
                .read_to_end(&mut out)
                .is_err()
            {
                break;
            }
            out
        } else {
            payload.to_vec()
        };
        chunks.push(Chunk {
            tag: [b[o], b[o + 1], b[o + 2], b[o + 3]],
            codec,
            raw,
        });
        o += HEADER + stored;
    }
    (pre, chunks)
}

fn store(c: &Chunk) -> io::Result<Vec<u8>> {
    let stored = if c.codec == 1 {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&c.raw)?;
        e.finish()?
    } else {
        c.raw.clone()
    };
    let mut out = Vec::with_capacity(HEADER + stored.len());
    out.extend_from_slice(&c.tag);
    out.push(c.codec);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    out.extend_from_slice(&(c.raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&stored).to_le_bytes());
    out.extend_from_slice(&stored);
    Ok(out)
}

fn join(pre: &[u8], chunks: &[Chunk]) -> io::Result<Vec<u8>> {
    let mut out = pre.to_vec();
    for c in chunks {
        out.extend(store(c)?);
        if out.len() > MAX_PART {
            break;
        }
    }
    Ok(out)
}

fn interesting(rng: &mut Rng) -> u64 {
    let random = rng.u64() >> rng.below(64);
    *rng.pick(&[
        0,
        1,
        127,
        128,
        4096,
        65_536,
        1 << 20,
        10_000_000,
        u32::MAX as u64,
        u64::MAX,
        random,
    ])
}

/// Rewrites the `k`-th varint of a payload (after a one-byte table id for RECS).
fn set_varint(rng: &mut Rng, c: &mut Chunk) -> String {
    let start = usize::from(&c.tag == b"RECS");
    let k = rng.below(4);
    let mut pos = start;
    for _ in 0..k {
        while pos < c.raw.len() && c.raw[pos] & 0x80 != 0 {
            pos += 1;
        }
        pos += 1;
    }
    if pos >= c.raw.len() {
        return "no varint there".into();
    }
    let mut end = pos;
    while end < c.raw.len() && c.raw[end] & 0x80 != 0 {
        end += 1;
    }
    let v = interesting(rng);
    let mut enc = Vec::new();
    varint::put(&mut enc, v);
    c.raw.splice(pos..(end + 1).min(c.raw.len()), enc);
    format!(
        "varint {k} of a {} chunk set to {v}",
        String::from_utf8_lossy(&c.tag)
    )
}

/// A RECS chunk claiming `rows` rows of zero-byte-per-row columns (or of none).
fn bomb_recs(rng: &mut Rng) -> (Chunk, String) {
    let rows = *rng.pick(&[10_000u64, 1_000_000, 4_000_000, 10_000_000]);
    let ncols = *rng.pick(&[0u64, 1, 17]);
    let mut raw = vec![1u8];
    varint::put(&mut raw, rows);
    varint::put(&mut raw, ncols);
    let body = (rows as usize).min(4 << 20);
    for _ in 0..ncols {
        varint::put(&mut raw, body as u64);
        raw.extend(std::iter::repeat_n(0u8, body));
        if raw.len() > 40 << 20 {
            break;
        }
    }
    let c = Chunk {
        tag: *b"RECS",
        codec: 1,
        raw,
    };
    (c, format!("a RECS bomb of {rows} rows, {ncols} columns"))
}

fn bomb_strs(rng: &mut Rng, first: u64) -> (Chunk, String) {
    let n = *rng.pick(&[100_000u64, 2_000_000, 10_000_000]);
    let mut raw = Vec::new();
    varint::put(&mut raw, first);
    varint::put(&mut raw, n);
    raw.extend(std::iter::repeat_n(0u8, (n as usize).min(32 << 20)));
    let c = Chunk {
        tag: *b"STRS",
        codec: 1,
        raw,
    };
    (c, format!("a STRS chunk of {n} empty strings"))
}

impl Target for NativePart {
    fn name(&self) -> &'static str {
        "native-part"
    }

    fn generate(&self, rng: &mut Rng, dir: &Path) -> io::Result<Case> {
        let (name, part) = rng.pick(&self.parts);
        let (pre, mut chunks) = split(part);
        let mut what = vec![format!("native part from {name}")];
        let mut b = match rng.below(10) {
            0 | 1 if !chunks.is_empty() => {
                let i = rng.below(chunks.len());
                what.push(set_varint(rng, &mut chunks[i]));
                join(&pre, &chunks)?
            }
            2 => {
                // Stored once and repeated as bytes: the fuzzer itself stays small.
                let (c, w) = bomb_recs(rng);
                let stored = store(&c)?;
                drop(c);
                let times = 1 + rng.below(40);
                let at = rng.below(chunks.len() + 1);
                let mut b = join(&pre, &chunks[..at])?;
                for _ in 0..times {
                    if b.len() + stored.len() > MAX_PART {
                        break;
                    }
                    b.extend_from_slice(&stored);
                }
                b.extend(join(&[], &chunks[at..])?);
                what.push(format!("{w}, {times} times"));
                b
            }
            3 => {
                let first = if rng.chance(0.5) { 0 } else { interesting(rng) };
                let (c, w) = bomb_strs(rng, first);
                chunks.insert(rng.below(chunks.len() + 1), c);
                what.push(w);
                join(&pre, &chunks)?
            }
            4 if !chunks.is_empty() => {
                let i = rng.below(chunks.len());
                let times = 1 + rng.below(200);
                let c = chunks[i].clone();
                for _ in 0..times {
                    chunks.insert(i, c.clone());
                }
                what.push(format!("chunk {i} repeated {times} times"));
                join(&pre, &chunks)?
            }
            5 if !chunks.is_empty() => {
                // A length field set to something else, checksum left as it was.
                let mut b = join(&pre, &chunks)?;
                let i = rng.below(chunks.len());
                let mut o = 12;
                for c in &chunks[..i] {
                    o += HEADER + store(c)?.len() - HEADER;
                }
                let field = o + 8 + 4 * rng.below(2);
                let v = interesting(rng) as u32;
                if field + 4 <= b.len() {
                    b[field..field + 4].copy_from_slice(&v.to_le_bytes());
                }
                what.push(format!("a length field of chunk {i} set to {v}"));
                b
            }
            6 => {
                // Headers of known chunks packed one after another, each claiming bytes that
                // follow it (a search after damage must not check each at full cost).
                let mut b = part.clone();
                let claim = *rng.pick(&[64u32, 65_536, 1 << 20, 16 << 20]);
                let tag: [u8; 4] = *rng.pick(&[*b"RECS", *b"STRS", *b"HEAD"]);
                let mut fake = tag.to_vec();
                fake.extend_from_slice(&[rng.below(2) as u8, 0, 0, 0]);
                fake.extend_from_slice(&claim.to_le_bytes());
                fake.extend_from_slice(&claim.to_le_bytes());
                fake.extend_from_slice(&(rng.u64() as u32).to_le_bytes());
                let at = 12 + rng.below(b.len().saturating_sub(12).max(1));
                let n = (MAX_PART.saturating_sub(b.len())) / fake.len();
                let block: Vec<u8> = fake.iter().copied().cycle().take(n * fake.len()).collect();
                b.splice(at.min(b.len()).., block);
                what.push(format!(
                    "{n} fake {} headers claiming {claim} bytes",
                    String::from_utf8_lossy(&tag)
                ));
                b
            }
            _ => {
                let mut b = part.clone();
                what.push(mutate::bytes(rng, &mut b));
                b
            }
        };
        if rng.chance(0.2) {
            what.push(mutate::bytes(rng, &mut b));
        }
        b.truncate(MAX_PART);
        case_for(rng, dir, name, b, what.join("; "))
    }
}
