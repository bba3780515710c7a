#!/usr/bin/env python3
"""Parses a `cutrace convert --perfetto` export with Perfetto's own `perfetto_trace.proto`
bindings (the `perfetto` Python package) and checks what a reader relies on: no field the schema
does not know, interned names and categories defined before use, events in time order, every
SLICE_END closing an open slice of its track, every flow that ends having started. Prints one
summary line; exit 1 on any problem.

usage: perfetto_schema_check.py TRACE.pftrace
"""
import sys
from google.protobuf import unknown_fields
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as P
t = P.Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
def unknown(m, path="") :
    n = len(unknown_fields.UnknownFieldSet(m))
    assert n == 0, (path, n)
    for f, v in m.ListFields():
        if f.type == f.TYPE_MESSAGE:
            for x in (v if f.is_repeated else [v]):
                unknown(x, path + "." + f.name)
names, cats, keys = {}, {}, {}
tracks = {}
opens = {}
counts = {"begin":0,"end":0,"instant":0}
flows_start, flows_end = set(), set()
last_ts = 0
for i, p in enumerate(t.packet):
    unknown(p)
    if p.HasField("track_descriptor"):
        d = p.track_descriptor; tracks[d.uuid] = d
        continue
    if p.HasField("interned_data"):
        for e in p.interned_data.event_names: names[e.iid] = e.name
        for e in p.interned_data.event_categories: cats[e.iid] = e.name
        for e in p.interned_data.debug_annotation_names: keys[e.iid] = e.name
    if not p.HasField("track_event"): continue
    assert p.timestamp >= last_ts, "time order"; last_ts = p.timestamp
    e = p.track_event
    assert e.track_uuid in tracks
    st = opens.setdefault(e.track_uuid, [])
    if e.type == 1:
        assert e.name_iid in names and all(c in cats for c in e.category_iids)
        for a in e.debug_annotations: assert a.name_iid in keys
        st.append((p.timestamp, names[e.name_iid])); counts["begin"] += 1
        flows_start.update(e.flow_ids); flows_end.update(e.terminating_flow_ids)
    elif e.type == 2:
        b = st.pop(); assert b[0] <= p.timestamp; counts["end"] += 1
    elif e.type == 3: counts["instant"] += 1
assert all(not s for s in opens.values()), "unclosed"
assert flows_end <= flows_start, "flow ends without start"
print(len(t.packet), "packets,", len(tracks), "tracks,", counts, "flows", len(flows_end), "names", len(names))
