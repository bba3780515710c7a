//! A Perfetto trace (`.pftrace`) as a golden shows it: one line per packet, each field by its
//! name in `perfetto_trace.proto` where it is one the TracePacket subset cutrace writes, else by
//! its number, with interned names written beside their iids. The decoder reads the protobuf
//! wire format itself, apart from the writer (`cutrace-export/src/perfetto.rs`): a field it has
//! no name for is still shown, a length-delimited one as text, a nested message (when its bytes
//! decode as one) or hex.

use std::collections::HashMap;

/// One field's value on the wire.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of one message, or None when `b` is not a well-formed message.
fn fields(b: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let (field, wire) = (key >> 3, key & 7);
        if field == 0 {
            return None;
        }
        let v = match wire {
            0 => Wire::Varint(varint(b, &mut at)?),
            1 => {
                let x = b.get(at..at + 8)?;
                at += 8;
                Wire::Fixed64(u64::from_le_bytes(x.try_into().ok()?))
            }
            2 => {
                let n = usize::try_from(varint(b, &mut at)?).ok()?;
                let x = b.get(at..at.checked_add(n)?)?;
                at += n;
                Wire::Bytes(x)
            }
            5 => {
                let x = b.get(at..at + 4)?;
                at += 4;
                Wire::Fixed32(u32::from_le_bytes(x.try_into().ok()?))
            }
            _ => return None,
        };
        out.push((field, v));
    }
    Some(out)
}

/// The messages whose field names the dump knows.
#[derive(Clone, Copy, PartialEq)]
enum Msg {
    Packet,
    TrackDescriptor,
    Process,
    Thread,
    Counter,
    TrackEvent,
    Annotation,
    Interned,
    /// EventCategory, EventName and DebugAnnotationName: `iid`, `name`.
    InternedString,
    Unknown,
}

/// How a known field's value reads.
#[derive(Clone, Copy)]
enum Kind {
    Uint,
    /// int32/int64: a varint holding two's complement.
    Int,
    Double,
    Fixed,
    Text,
    Sub(Msg),
    /// An iid of an interned event name, category or annotation name.
    Iid(Interned),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Interned {
    Category,
    EventName,
    AnnotationName,
}

/// Field `n` of `m`: its name in perfetto_trace.proto and how its value reads.
fn known(m: Msg, n: u64) -> Option<(&'static str, Kind)> {
    use Kind::*;
    Some(match (m, n) {
        (Msg::Packet, 8) => ("timestamp", Uint),
        (Msg::Packet, 10) => ("trusted_packet_sequence_id", Uint),
        (Msg::Packet, 11) => ("track_event", Sub(Msg::TrackEvent)),
        (Msg::Packet, 12) => ("interned_data", Sub(Msg::Interned)),
        (Msg::Packet, 13) => ("sequence_flags", Uint),
        (Msg::Packet, 60) => ("track_descriptor", Sub(Msg::TrackDescriptor)),
        (Msg::TrackDescriptor, 1) => ("uuid", Uint),
        (Msg::TrackDescriptor, 2) => ("name", Text),
        (Msg::TrackDescriptor, 3) => ("process", Sub(Msg::Process)),
        (Msg::TrackDescriptor, 4) => ("thread", Sub(Msg::Thread)),
        (Msg::TrackDescriptor, 5) => ("parent_uuid", Uint),
        (Msg::TrackDescriptor, 8) => ("counter", Sub(Msg::Counter)),
        (Msg::TrackDescriptor, 11) => ("child_ordering", Uint),
        (Msg::TrackDescriptor, 12) => ("sibling_order_rank", Int),
        (Msg::Process, 1) => ("pid", Int),
        (Msg::Process, 6) => ("process_name", Text),
        (Msg::Thread, 1) => ("pid", Int),
        (Msg::Thread, 2) => ("tid", Int),
        (Msg::Thread, 5) => ("thread_name", Text),
        (Msg::TrackEvent, 3) => ("category_iids", Iid(Interned::Category)),
        (Msg::TrackEvent, 4) => ("debug_annotations", Sub(Msg::Annotation)),
        (Msg::TrackEvent, 9) => ("type", Uint),
        (Msg::TrackEvent, 10) => ("name_iid", Iid(Interned::EventName)),
        (Msg::TrackEvent, 11) => ("track_uuid", Uint),
        (Msg::TrackEvent, 44) => ("double_counter_value", Double),
        (Msg::TrackEvent, 47) => ("flow_ids", Fixed),
        (Msg::TrackEvent, 48) => ("terminating_flow_ids", Fixed),
        (Msg::Annotation, 1) => ("name_iid", Iid(Interned::AnnotationName)),
        (Msg::Annotation, 3) => ("uint_value", Uint),
        (Msg::Annotation, 4) => ("int_value", Int),
        (Msg::Annotation, 5) => ("double_value", Double),
        (Msg::Annotation, 6) => ("string_value", Text),
        (Msg::Interned, 1) => ("event_categories", Sub(Msg::InternedString)),
        (Msg::Interned, 2) => ("event_names", Sub(Msg::InternedString)),
        (Msg::Interned, 3) => ("debug_annotation_names", Sub(Msg::InternedString)),
        (Msg::InternedString, 1) => ("iid", Uint),
        (Msg::InternedString, 2) => ("name", Text),
        _ => return None,
    })
}

/// A string for the dump: quoted, with `"`, `\` and control characters escaped.
fn quoted(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// Whether bytes of an unknown field read as text rather than as a message.
fn is_text(b: &[u8]) -> bool {
    std::str::from_utf8(b).is_ok_and(|s| !s.is_empty() && s.chars().all(|c| !c.is_control()))
}

/// Interned strings by (sequence, kind, iid).
type Names = HashMap<(u64, Interned, u64), String>;

/// `m`'s fields on one line; `seq` and `names` resolve iids.
fn render(m: Msg, b: &[u8], seq: u64, names: &Names, out: &mut String) {
    let Some(fs) = fields(b) else {
        out.push_str(&format!("<not a message: {} bytes>", b.len()));
        return;
    };
    for (i, (n, v)) in fs.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let (name, kind) = match known(m, *n) {
            Some((name, kind)) => (name.to_string(), Some(kind)),
            None => (format!("#{n}"), None),
        };
        out.push_str(&name);
        match (kind, v) {
            (Some(Kind::Sub(sub)), Wire::Bytes(x)) => {
                out.push('{');
                render(sub, x, seq, names, out);
                out.push('}');
            }
            (Some(Kind::Text), Wire::Bytes(x)) => out.push_str(&format!("={}", quoted(x))),
            (Some(Kind::Int), Wire::Varint(x)) => out.push_str(&format!("={}", *x as i64)),
            (Some(Kind::Double), Wire::Fixed64(x)) => {
                out.push_str(&format!("={:?}", f64::from_bits(*x)));
            }
            (Some(Kind::Fixed), Wire::Fixed64(x)) => out.push_str(&format!("={x:#x}")),
            (Some(Kind::Iid(k)), Wire::Varint(x)) => {
                out.push_str(&format!("={x}"));
                if let Some(s) = names.get(&(seq, k, *x)) {
                    out.push_str(&format!("({})", quoted(s.as_bytes())));
                }
            }
            (_, Wire::Varint(x)) => out.push_str(&format!("={x}")),
            (_, Wire::Fixed64(x)) => out.push_str(&format!("=fixed64:{x:#x}")),
            (_, Wire::Fixed32(x)) => out.push_str(&format!("=fixed32:{x:#x}")),
            (_, Wire::Bytes(x)) if is_text(x) => out.push_str(&format!("={}", quoted(x))),
            (_, Wire::Bytes(x)) if !x.is_empty() && fields(x).is_some() => {
                out.push('{');
                render(Msg::Unknown, x, seq, names, out);
                out.push('}');
            }
            (_, Wire::Bytes(x)) => {
                out.push_str("=0x");
                for byte in *x {
                    out.push_str(&format!("{byte:02x}"));
                }
            }
        }
    }
}

/// A packet's sequence, and the interned strings it brings (after clearing its sequence's when
/// its flags say the incremental state was cleared).
fn learn(packet: &[u8], names: &mut Names) -> u64 {
    let fs = fields(packet).unwrap_or_default();
    let mut seq = 0;
    let mut cleared = false;
    for (n, v) in &fs {
        match (n, v) {
            (10, Wire::Varint(x)) => seq = *x,
            (13, Wire::Varint(x)) => cleared = x & 1 != 0,
            _ => {}
        }
    }
    if cleared {
        names.retain(|k, _| k.0 != seq);
    }
    for (n, v) in &fs {
        let (12, Wire::Bytes(data)) = (n, v) else {
            continue;
        };
        for (kind, v) in fields(data).unwrap_or_default() {
            let kind = match kind {
                1 => Interned::Category,
                2 => Interned::EventName,
                3 => Interned::AnnotationName,
                _ => continue,
            };
            let Wire::Bytes(entry) = v else { continue };
            let (mut iid, mut name) = (None, None);
            for (f, x) in fields(entry).unwrap_or_default() {
                match (f, x) {
                    (1, Wire::Varint(i)) => iid = Some(i),
                    (2, Wire::Bytes(s)) => name = Some(String::from_utf8_lossy(s).into_owned()),
                    _ => {}
                }
            }
            if let (Some(iid), Some(name)) = (iid, name) {
                names.insert((seq, kind, iid), name);
            }
        }
    }
    seq
}

/// What a packet is, for the counts and the choice of packets shown: the fields it holds past
/// its timestamp, sequence and flags, and for a track event its type and categories.
fn packet_kind(packet: &[u8], seq: u64, names: &Names) -> String {
    let mut held = Vec::new();
    for (f, v) in fields(packet).unwrap_or_default() {
        if [8, 10, 13].contains(&f) {
            continue;
        }
        held.push(known(Msg::Packet, f).map_or(format!("#{f}"), |k| k.0.to_string()));
        let (11, Wire::Bytes(event)) = (f, v) else {
            continue;
        };
        for (g, x) in fields(event).unwrap_or_default() {
            match (g, x) {
                (9, Wire::Varint(t)) => held.push(format!("type={t}")),
                (3, Wire::Varint(c)) => held.push(
                    names
                        .get(&(seq, Interned::Category, c))
                        .map_or(format!("category {c}"), |n| quoted(n.as_bytes())),
                ),
                _ => {}
            }
        }
    }
    held.join(" ")
}

/// The trace as lines: a count of its packets by kind ([`packet_kind`]), then the first
/// `per_kind` packets of each kind in file order, one a line, at most `max` in all.
pub fn lines(trace: &[u8], per_kind: usize, max: usize) -> Vec<String> {
    let Some(top) = fields(trace) else {
        return vec!["(not a protobuf message)".into()];
    };
    let mut names = Names::new();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    let mut shown = Vec::new();
    let mut packets = 0;
    for (n, v) in &top {
        let (1, Wire::Bytes(p)) = (n, v) else {
            shown.push(format!("(a field {n} of Trace that is not a packet)"));
            continue;
        };
        packets += 1;
        let seq = learn(p, &mut names);
        let count = kinds.entry(packet_kind(p, seq, &names)).or_default();
        *count += 1;
        if *count <= per_kind && shown.len() < max {
            let mut line = String::new();
            render(Msg::Packet, p, seq, &names, &mut line);
            shown.push(line);
        }
    }
    let by: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let mut out = vec![format!("({packets} packets; {})", by.join(", "))];
    if packets > shown.len() {
        let more = packets - shown.len();
        out.extend(shown);
        out.push(format!(
            "… {more} more packets, covered by the CRC-32 above"
        ));
    } else {
        out.extend(shown);
    }
    out
}

#[test]
fn packets_read_by_name_with_interned_names_resolved() {
    // Written by hand, byte by byte: a descriptor packet, then an event packet that interns
    // its name, and a field no name is known for.
    let descriptor = [0x50, 0x01, 0xe2, 0x03, 0x05, 0x08, 0x07, 0x12, 0x01, b'g'];
    let interned = [0x12, 0x06, 0x08, 0x03, 0x12, 0x02, b'k', b'1'];
    let event = [0x48, 0x01, 0x50, 0x03, 0x58, 0x07];
    let mut packet = vec![
        0x40,
        0x64,
        0x50,
        0x02,
        0x68,
        0x03,
        0x62,
        interned.len() as u8,
    ];
    packet.extend(interned);
    packet.extend([0x5a, event.len() as u8]);
    packet.extend(event);
    packet.extend([0xa8, 0x06, 0x09]); // field 101, varint 9
    let mut trace = vec![0x0a, descriptor.len() as u8];
    trace.extend(descriptor);
    trace.extend([0x0a, packet.len() as u8]);
    trace.extend(packet);
    assert_eq!(
        lines(&trace, 1, 5),
        [
            "(2 packets; interned_data track_event type=1 #101: 1, track_descriptor: 1)",
            r#"trusted_packet_sequence_id=1 track_descriptor{uuid=7 name="g"}"#,
            r#"timestamp=100 trusted_packet_sequence_id=2 sequence_flags=3 interned_data{event_names{iid=3 name="k1"}} track_event{type=1 name_iid=3("k1") track_uuid=7} #101=9"#,
        ]
    );
    assert_eq!(
        lines(&trace, 1, 1).last().unwrap(),
        "… 1 more packets, covered by the CRC-32 above"
    );
}
