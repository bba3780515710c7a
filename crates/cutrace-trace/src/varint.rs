//! Unsigned LEB128 varints and zigzag, the one implementation: the native format's columns,
//! Perfetto's protobuf, Parquet's Thrift compact protocol and the analysis' run logs all encode
//! integers this way.
//!
//! A varint is 7 bits a byte, least significant first, the high bit set on every byte but the
//! last; a `u64` takes 1 to [`MAX_LEN`] bytes. The decoder accepts non-minimal encodings (`80 00`
//! is 0), as protobuf readers do, and refuses input that ends inside a varint, that runs past
//! ten bytes, or whose tenth byte holds bits beyond 64.

/// The most bytes a `u64` takes.
pub const MAX_LEN: usize = 10;

/// Appends `v` to `out`.
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `v`'s bytes in a fixed array, and how many of them are used: for a writer that keeps a
/// header on the stack.
#[inline]
pub fn encode(mut v: u64) -> ([u8; MAX_LEN], usize) {
    let mut b = [0u8; MAX_LEN];
    let mut n = 0;
    while v >= 0x80 {
        b[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    b[n] = v as u8;
    (b, n + 1)
}

/// Reads the varint at `*pos` and moves `*pos` past it; `None` when the bytes end inside it or it
/// is overlong (see the module's note), with `*pos` then left anywhere inside it.
#[inline]
pub fn get(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

/// How many bytes [`put`] writes for `v`.
#[inline]
pub const fn encoded_len(v: u64) -> usize {
    // 1 for 0, else ⌈significant bits / 7⌉.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Maps signed to unsigned so that values near zero stay short: 0, −1, 1, −2 … → 0, 1, 2, 3 …
#[inline]
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut b = Vec::new();
        put(&mut b, v);
        b
    }

    #[test]
    fn known_encodings() {
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(1), [0x01]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(
            enc(u64::MAX),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        assert_eq!(
            enc(1 << 63),
            [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]
        );
    }

    #[test]
    fn round_trips_and_lengths_agree() {
        let mut vals = vec![0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX];
        vals.extend((0..64).map(|s| 1u64 << s));
        vals.extend((1..64).map(|s| (1u64 << s) - 1));
        for v in vals {
            let b = enc(v);
            assert_eq!(b.len(), encoded_len(v), "{v}");
            let (a, n) = encode(v);
            assert_eq!(&a[..n], &b[..], "{v}");
            assert!(b.len() <= MAX_LEN);
            let mut pos = 0;
            assert_eq!(get(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
        }
    }

    #[test]
    fn reads_in_sequence_from_an_offset() {
        let mut b = vec![0xaa];
        put(&mut b, 300);
        put(&mut b, 0);
        put(&mut b, u64::MAX);
        let mut pos = 1;
        assert_eq!(get(&b, &mut pos), Some(300));
        assert_eq!(get(&b, &mut pos), Some(0));
        assert_eq!(get(&b, &mut pos), Some(u64::MAX));
        assert_eq!(pos, b.len());
        assert_eq!(get(&b, &mut pos), None);
    }

    #[test]
    fn truncated_input_is_refused() {
        let b = enc(u64::MAX);
        for cut in 0..b.len() {
            let mut pos = 0;
            assert_eq!(get(&b[..cut], &mut pos), None, "cut at {cut}");
        }
        let mut pos = 0;
        assert_eq!(get(&[0x80], &mut pos), None);
    }

    #[test]
    fn overlong_input_is_refused() {
        // Eleven bytes: past the ten a u64 can need.
        let mut pos = 0;
        assert_eq!(get(&[0xff; 11], &mut pos), None);
        // Ten bytes whose last carries bits 64 and up.
        let mut b = vec![0xff; 9];
        b.push(0x02);
        let mut pos = 0;
        assert_eq!(get(&b, &mut pos), None);
        // Ten bytes whose last says more follow.
        let mut b = vec![0x80; 9];
        b.push(0x81);
        b.push(0x00);
        let mut pos = 0;
        assert_eq!(get(&b, &mut pos), None);
    }

    #[test]
    fn non_minimal_encodings_are_read() {
        let mut pos = 0;
        assert_eq!(get(&[0x80, 0x00], &mut pos), Some(0));
        assert_eq!(pos, 2);
        let mut b = vec![0x81];
        b.extend([0x80; 8]);
        b.push(0x00);
        let mut pos = 0;
        assert_eq!(get(&b, &mut pos), Some(1));
    }

    #[test]
    fn zigzag_maps_small_magnitudes_to_small_values() {
        for (s, u) in [(0i64, 0u64), (-1, 1), (1, 2), (-2, 3), (2, 4)] {
            assert_eq!(zigzag(s), u);
            assert_eq!(unzigzag(u), s);
        }
        assert_eq!(zigzag(i64::MAX), u64::MAX - 1);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
        for v in [i64::MIN, i64::MIN + 1, -12_345, 0, 12_345, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
