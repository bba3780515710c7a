//! The protobuf wire format, as much of it as the Perfetto export writes: varint, fixed64 and
//! length-delimited fields, the `perfetto_trace.proto` field numbers used, and the interning of
//! names that a packet sequence carries.

use cutrace_trace::varint;

use super::HashMap;

pub(crate) fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
    varint::put(b, u64::from(field) << 3);
    varint::put(b, v);
}

/// int32/int64 fields: negative values as ten-byte two's complement, as protobuf does.
pub(crate) fn int(b: &mut Vec<u8>, field: u32, v: i64) {
    uint(b, field, v as u64);
}

pub(crate) fn fixed64(b: &mut Vec<u8>, field: u32, v: u64) {
    varint::put(b, (u64::from(field) << 3) | 1);
    b.extend(v.to_le_bytes());
}

pub(crate) fn bytes(b: &mut Vec<u8>, field: u32, v: &[u8]) {
    varint::put(b, (u64::from(field) << 3) | 2);
    varint::put(b, v.len() as u64);
    b.extend_from_slice(v);
}

/// A length-delimited sub-message built by `f`.
pub(crate) fn msg(b: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>)) {
    let mut sub = Vec::new();
    f(&mut sub);
    bytes(b, field, &sub);
}

// perfetto_trace.proto field numbers.
pub(crate) mod pf {
    pub const TRACE_PACKET: u32 = 1;
    // TracePacket
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
    pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
    // TrackDescriptor
    pub const TD_UUID: u32 = 1;
    pub const TD_NAME: u32 = 2;
    pub const TD_PROCESS: u32 = 3;
    pub const TD_THREAD: u32 = 4;
    pub const TD_PARENT_UUID: u32 = 5;
    pub const TD_COUNTER: u32 = 8;
    pub const TD_CHILD_ORDERING: u32 = 11;
    pub const TD_SIBLING_ORDER_RANK: u32 = 12;
    pub const ORDERING_EXPLICIT: u64 = 3;
    // ProcessDescriptor / ThreadDescriptor
    pub const PD_PID: u32 = 1;
    pub const PD_NAME: u32 = 6;
    pub const THD_PID: u32 = 1;
    pub const THD_TID: u32 = 2;
    pub const THD_NAME: u32 = 5;
    // TrackEvent
    pub const TE_CATEGORY_IIDS: u32 = 3;
    pub const TE_CATEGORIES: u32 = 22;
    pub const TE_NAME: u32 = 23;
    pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
    pub const TE_TYPE: u32 = 9;
    pub const TE_NAME_IID: u32 = 10;
    pub const TE_TRACK_UUID: u32 = 11;
    pub const TE_FLOW_IDS: u32 = 47;
    pub const TE_TERMINATING_FLOW_IDS: u32 = 48;
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
    pub const COUNTER: u64 = 4;
    pub const TE_DOUBLE_COUNTER_VALUE: u32 = 44;
    // DebugAnnotation
    pub const DA_NAME_IID: u32 = 1;
    pub const DA_UINT: u32 = 3;
    pub const DA_INT: u32 = 4;
    pub const DA_DOUBLE: u32 = 5;
    pub const DA_STRING: u32 = 6;
    // InternedData: event_categories, event_names, debug_annotation_names; each {iid = 1, name = 2}
    pub const ID_CATEGORIES: u32 = 1;
    pub const ID_EVENT_NAMES: u32 = 2;
    pub const ID_ANNOTATION_NAMES: u32 = 3;
}

/// Interned strings of one kind: iids from 1, and the entries a packet must carry the first time
/// it uses one.
#[derive(Default)]
pub(super) struct Interner {
    ids: HashMap<String, u64>,
    pub(super) fresh: Vec<(u64, String)>,
}

impl Interner {
    pub(super) fn iid(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.ids.len() as u64 + 1;
        self.ids.insert(s.to_owned(), i);
        self.fresh.push((i, s.to_owned()));
        i
    }
}
