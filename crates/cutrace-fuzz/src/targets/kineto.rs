//! Kineto JSON inputs (plain and gzip) from the committed torch.profiler fixtures: JSON-aware
//! mutations (numbers, giant strings, deep nesting, repeated events), then byte-level ones, and
//! for gzip: bombs, trailing bytes, cut and concatenated streams.

use std::io::{self, Read, Write};
use std::path::Path;

use super::{case_for, fixtures, mutate, Case, Target};
use crate::rng::Rng;

pub struct KinetoJson {
    /// (name, uncompressed JSON) of each fixture.
    traces: Vec<(String, Vec<u8>)>,
    gzip: bool,
}

impl KinetoJson {
    pub fn load(repo: &Path, gzip: bool) -> io::Result<Self> {
        let mut traces = Vec::new();
        for (name, gz) in fixtures(repo, "tests/fixtures/kineto", ".json.gz")? {
            let mut json = Vec::new();
            flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut json)?;
            traces.push((name.trim_end_matches(".gz").to_string(), json));
        }
        Ok(KinetoJson { traces, gzip })
    }
}

impl Target for KinetoJson {
    fn name(&self) -> &'static str {
        if self.gzip {
            "kineto-gzip"
        } else {
            "kineto-json"
        }
    }

    fn generate(&self, rng: &mut Rng, dir: &Path) -> io::Result<Case> {
        let (name, json) = rng.pick(&self.traces);
        let mut b = json.clone();
        let mut what = vec![format!("{} from {name}", self.name())];
        match rng.below(8) {
            0 => what.push(number(rng, &mut b)),
            1 => what.push(giant_string(rng, &mut b)),
            2 => what.push(nesting(rng, &mut b)),
            3 => what.push(repeat_event(rng, &mut b)),
            4 => {}
            _ => what.push(mutate::bytes(rng, &mut b)),
        }
        if rng.chance(0.3) {
            what.push(mutate::bytes(rng, &mut b));
        }
        if !self.gzip {
            return case_for(rng, dir, name, b, what.join("; "));
        }
        let mut gz = match rng.below(10) {
            0 => {
                what.push("gzip bomb".into());
                bomb(rng)?
            }
            _ => gzip(&b)?,
        };
        match rng.below(8) {
            0 => {
                let n = 1 + rng.below(64);
                gz.extend((0..n).map(|_| rng.u64() as u8));
                what.push(format!("{n} trailing bytes"));
            }
            1 => {
                let at = rng.below(gz.len());
                gz.truncate(at);
                what.push(format!("gzip cut at {at}"));
            }
            2 => {
                let again = gzip(b"")?;
                gz.extend(again);
                what.push("a second, empty member".into());
            }
            3 => what.push(mutate::bytes(rng, &mut gz)),
            _ => {}
        }
        case_for(rng, dir, &format!("{name}.gz"), gz, what.join("; "))
    }
}

fn gzip(b: &[u8]) -> io::Result<Vec<u8>> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b)?;
    e.finish()
}

/// A small gzip of a trace with one enormous string, or enormously many events.
fn bomb(rng: &mut Rng) -> io::Result<Vec<u8>> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mb = 1 + rng.below(256);
    let chunk = vec![b'a'; 1 << 20];
    if rng.chance(0.5) {
        e.write_all(
            br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1, "name": ""#,
        )?;
        for _ in 0..mb {
            e.write_all(&chunk)?;
        }
        if rng.chance(0.5) {
            e.write_all(b"\"}]}")?;
        }
    } else {
        e.write_all(br#"{"traceEvents": ["#)?;
        // Events that are skipped, or allocations at one address that are all kept. A kept
        // allocation is a 104-byte record per 150 bytes of JSON (a kernel is 48 per 200 or
        // more), so its bombs stay under 64 MB of JSON: the records a trace really holds are
        // memory it may take, and the ceiling is for the rest.
        let (ev, mb): (&[u8], usize) = if rng.chance(0.5) {
            (
                br#"{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1},"#,
                mb,
            )
        } else {
            (
                br#"{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1, "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 1}},"#,
                mb.min(64),
            )
        };
        let per_mb = (1 << 20) / ev.len();
        let block: Vec<u8> = ev.iter().copied().cycle().take(per_mb * ev.len()).collect();
        for _ in 0..mb {
            e.write_all(&block)?;
        }
        e.write_all(br#"{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]}"#)?;
    }
    e.finish()
}

/// Positions just after `key` in `b`.
fn after(b: &[u8], key: &[u8]) -> Vec<usize> {
    b.windows(key.len())
        .enumerate()
        .filter(|(_, w)| *w == key)
        .map(|(i, _)| i + key.len())
        .take(100_000)
        .collect()
}

/// Replaces the number after a `"ts"`, `"dur"`, `"pid"` or `"tid"` with an extreme one.
fn number(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    let key = *rng.pick(&[
        &b"\"ts\": "[..],
        b"\"dur\": ",
        b"\"pid\": ",
        b"\"tid\": ",
        b"\"device\": ",
        // A `[memory]` event's size, address, totals and device.
        b"\"Bytes\": ",
        b"\"Addr\": ",
        b"\"Total Allocated\": ",
        b"\"Device Id\": ",
    ]);
    let spots = after(b, key);
    if spots.is_empty() {
        return "no number to change".into();
    }
    let at = *rng.pick(&spots);
    let end = at
        + b[at..]
            .iter()
            .take_while(|c| !matches!(c, b',' | b'}' | b' '))
            .count();
    let v = *rng.pick(&[
        "-1",
        "-0.5",
        "18446744073709551615",
        "18446744073709551616",
        "4294967297",
        "1e308",
        "-1e308",
        "0.0000000001",
        "99999999999999999999999999999",
        "\"7\"",
        "null",
        "NaN",
    ]);
    b.splice(at..end, v.bytes());
    format!("{} set to {v}", String::from_utf8_lossy(key).trim())
}

/// Makes one string (a name) up to 8 MB long.
fn giant_string(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    let spots = after(b, b"\"name\": \"");
    if spots.is_empty() {
        return "no name".into();
    }
    let at = *rng.pick(&spots);
    let n = (1 + rng.below(8 << 20)).min(mutate::MAX_INPUT.saturating_sub(b.len()));
    let fill = if rng.chance(0.5) { b'a' } else { b'\\' };
    let mut s = vec![fill; n];
    if fill == b'\\' {
        // Valid escapes, each decoding to one byte.
        for pair in s.chunks_mut(2) {
            if pair.len() == 2 {
                pair[1] = b'n';
            } else {
                pair[0] = b'x';
            }
        }
    }
    b.splice(at..at, s);
    format!("a name {n} bytes longer")
}

/// Inserts a value nested 100 to 200,000 deep into an event or at the top level.
fn nesting(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    let depth = *rng.pick(&[100usize, 127, 128, 129, 1000, 200_000]);
    let open = if rng.chance(0.5) { b'[' } else { b'{' };
    let mut v = Vec::new();
    for _ in 0..depth {
        v.push(open);
        if open == b'{' {
            v.extend_from_slice(b"\"k\":");
        }
    }
    v.push(b'1');
    for _ in 0..depth {
        v.push(if open == b'[' { b']' } else { b'}' });
    }
    let spots = after(b, b"{");
    if spots.is_empty() {
        return "nowhere to nest".into();
    }
    let at = *rng.pick(&spots);
    let mut ins = b"\"nest\": ".to_vec();
    ins.extend(v);
    ins.extend_from_slice(b", ");
    b.splice(at..at, ins);
    format!("a value nested {depth} deep")
}

/// Repeats one event many times (up to the input cap).
fn repeat_event(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    let starts = after(b, b"{\"ph\"");
    if starts.is_empty() {
        return "no event".into();
    }
    let s = *rng.pick(&starts) - 5;
    let Some(len) = b[s..].iter().position(|&c| c == b'}') else {
        return "no event end".into();
    };
    let mut ev = b[s..=s + len].to_vec();
    ev.extend_from_slice(b", ");
    let times = (1 + rng.below(100_000)).min(mutate::MAX_INPUT.saturating_sub(b.len()) / ev.len());
    let block: Vec<u8> = ev.iter().copied().cycle().take(ev.len() * times).collect();
    b.splice(s..s, block);
    format!("an event repeated {times} times")
}
