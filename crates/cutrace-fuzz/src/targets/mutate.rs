//! Byte-level mutations any input can take: bit flips, truncation, cuts, repeats, noise.

use crate::rng::Rng;

/// Inputs never grow past this: the acceptance speaks of inputs up to 10 MB.
pub const MAX_INPUT: usize = 10 << 20;

/// Applies one to three byte-level mutations; returns what was done.
pub fn bytes(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    let n = 1 + rng.below(3);
    let mut done = Vec::new();
    for _ in 0..n {
        done.push(one(rng, b));
    }
    done.join(", ")
}

fn one(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    if b.is_empty() {
        b.push(rng.u64() as u8);
        return "one byte".into();
    }
    match rng.below(6) {
        0 => {
            let flips = 1 + rng.below(8);
            for _ in 0..flips {
                let at = rng.below(b.len());
                b[at] ^= 1 << rng.below(8);
            }
            format!("{flips} bit flips")
        }
        1 => {
            let at = rng.below(b.len());
            b.truncate(at);
            format!("truncated at {at}")
        }
        2 => {
            let at = rng.below(b.len());
            let len = rng.below((b.len() - at).min(4096) + 1);
            b.drain(at..at + len);
            format!("{len} bytes cut at {at}")
        }
        3 => {
            let at = rng.below(b.len());
            let len = 1 + rng.below((b.len() - at).min(65536));
            let times = 1 + rng.below(64);
            let piece = b[at..at + len].to_vec();
            let mut added = 0;
            for _ in 0..times {
                if b.len() + piece.len() > MAX_INPUT {
                    break;
                }
                b.splice(at..at, piece.iter().copied());
                added += 1;
            }
            format!("{len} bytes at {at} repeated {added} times")
        }
        4 => {
            let at = rng.below(b.len());
            let len = 1 + rng.below(64);
            let noise: Vec<u8> = (0..len).map(|_| rng.u64() as u8).collect();
            b.splice(at..at, noise);
            format!("{len} random bytes inserted at {at}")
        }
        _ => {
            let at = rng.below(b.len());
            let v = *rng.pick(&[0u8, 0xff, 0x7f, 0x80, b'"', b'{', b'[', b'-', b'9']);
            b[at] = v;
            format!("byte {at} set to {v:#x}")
        }
    }
}
