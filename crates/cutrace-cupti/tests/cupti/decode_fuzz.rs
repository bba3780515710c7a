//! `activity::decode` on arbitrary bytes: never a panic, and a record is only decoded when its
//! bytes hold every field read.

use cutrace_cupti::activity::{decode, kind, Activity};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..260)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn known_kinds_need_their_prefix(k in prop::sample::select(vec![
        kind::CONCURRENT_KERNEL, kind::RUNTIME, kind::DRIVER, kind::MEMCPY, kind::MEMSET,
        kind::SYNCHRONIZATION, kind::MARKER, kind::OVERHEAD, kind::DEVICE, kind::MEMORY2,
        kind::MEMORY_POOL,
    ]), len in 4usize..260) {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(&k.to_le_bytes());
        match decode(&b) {
            None => {}
            Some(Activity::Other(_)) => prop_assert!(false, "known kind {k} decoded as Other"),
            Some(_) => {
                // Whatever decoded at this length also decodes with more bytes.
                let mut longer = b.clone();
                longer.resize(260, 0);
                prop_assert!(decode(&longer).is_some());
            }
        }
    }
}
