//! Writer of the native format: buffers rows per table and appends them as checksummed chunks.
//!
//! Nothing is rewritten in place: every `flush` appends whole chunks, so a writer killed at any
//! instant leaves a file whose complete chunks all read back.

use std::collections::HashMap;
use std::io::{self, Write};

use super::codec::{encode_column, put_varint};
use super::{codec_id, tag, Header, MarkerEvent, Meta, Table, Tail, FORMAT_VERSION, MAGIC};
use crate::limits::{ROWS_PER_STORED_BYTE, STRING_BYTES_PER_STORED_BYTE};
use crate::model::*;

/// Appends records to a native trace.
pub struct Writer<W: Write> {
    out: W,
    strings: Interner,
    strings_written: usize,
    rows: HashMap<Table, Vec<u64>>,
    pending_rows: usize,
    records: u64,
    bytes_written: u64,
    /// Pad chunks deflate packs denser than a reader takes by default ([`Writer::unpadded`]).
    pad: bool,
}

impl<W: Write> Writer<W> {
    /// A writer that leaves chunks as dense as deflate makes them, past what a reader takes by
    /// default: for building hostile inputs in tests, never for a trace a user reads.
    pub fn unpadded(mut self) -> Self {
        self.pad = false;
        self
    }

    /// Starts a file: writes the magic, the version and the `HEAD` chunk.
    pub fn new(mut out: W, header: &Header) -> io::Result<Self> {
        let mut start = Vec::with_capacity(12);
        start.extend_from_slice(&MAGIC);
        start.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.write_all(&start)?;
        let mut w = Writer {
            out,
            strings: Interner::new(),
            strings_written: 0,
            rows: HashMap::new(),
            pending_rows: 0,
            records: 0,
            bytes_written: start.len() as u64,
            pad: true,
        };
        let mut h = header.clone();
        h.format_version = FORMAT_VERSION;
        w.json_chunk(tag::HEAD, &h)?;
        w.out.flush()?;
        Ok(w)
    }

    /// Interns a string for this file; ids are dense from 0 in first-use order.
    pub fn intern(&mut self, s: &str) -> StrId {
        self.strings.intern(s)
    }

    /// Rows buffered and not yet written.
    pub fn pending_rows(&self) -> usize {
        self.pending_rows
    }

    /// Records written or buffered so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes written to the output so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    fn push(&mut self, table: Table, row: &[u64]) {
        debug_assert_eq!(row.len(), table.ncols());
        self.rows.entry(table).or_default().extend_from_slice(row);
        self.pending_rows += 1;
        self.records += 1;
    }

    /// A kernel and its launch configuration (stored in the kernel's row: the format has no
    /// side table).
    pub fn push_kernel(&mut self, k: &Kernel, l: &Launch) {
        self.push(
            Table::Kernel,
            &[
                k.start_ns,
                k.end_ns.wrapping_sub(k.start_ns),
                k.correlation_id,
                k.device.into(),
                k.context.into(),
                k.stream,
                k.name.into(),
                l.grid[0].into(),
                l.grid[1].into(),
                l.grid[2].into(),
                l.block[0].into(),
                l.block[1].into(),
                l.block[2].into(),
                l.registers_per_thread.into(),
                l.static_shared_bytes.into(),
                l.dynamic_shared_bytes.into(),
                l.graph_id.into(),
            ],
        );
    }

    pub fn push_memcpy(&mut self, m: &Memcpy) {
        self.push(
            Table::Memcpy,
            &[
                m.start_ns,
                m.end_ns.wrapping_sub(m.start_ns),
                m.correlation_id,
                m.device.into(),
                m.context.into(),
                m.stream,
                copy_kind_code(m.kind),
                m.bytes,
            ],
        );
    }

    pub fn push_memset(&mut self, m: &Memset) {
        self.push(
            Table::Memset,
            &[
                m.start_ns,
                m.end_ns.wrapping_sub(m.start_ns),
                m.correlation_id,
                m.device.into(),
                m.context.into(),
                m.stream,
                m.bytes,
                m.value.into(),
            ],
        );
    }

    pub fn push_api(&mut self, a: &ApiCall) {
        self.push(
            Table::Api,
            &[
                a.start_ns,
                a.end_ns.wrapping_sub(a.start_ns),
                a.correlation_id,
                match a.kind {
                    ApiKind::Runtime => 0,
                    ApiKind::Driver => 1,
                },
                a.cbid.into(),
                a.name.into(),
                a.process.into(),
                a.thread,
                a.return_value as u32 as u64,
            ],
        );
    }

    /// `device` of a synchronization is stored as unknown; the reader fills it in from the
    /// context (CUPTI's synchronization record has no device field).
    pub fn push_sync(&mut self, s: &Synchronization, device_known: bool) {
        self.push(
            Table::Sync,
            &[
                s.start_ns,
                s.end_ns.wrapping_sub(s.start_ns),
                s.correlation_id,
                sync_kind_code(s.kind),
                s.context.into(),
                s.stream.map_or(0, |x| x.wrapping_add(1)),
                if device_known {
                    u64::from(s.device) + 1
                } else {
                    0
                },
            ],
        );
    }

    pub fn push_marker(&mut self, m: &MarkerEvent) {
        self.push(
            Table::Marker,
            &[
                m.ts_ns,
                m.id.into(),
                m.flags.into(),
                m.name.into(),
                m.domain.into(),
                m.process.into(),
                m.thread,
            ],
        );
    }

    pub fn push_overhead(&mut self, o: &Overhead) {
        self.push(
            Table::Overhead,
            &[
                o.start_ns,
                o.end_ns.wrapping_sub(o.start_ns),
                o.kind.into(),
                o.process.into(),
                o.thread,
            ],
        );
    }

    /// A counter value; its `f64` is stored by its bits, so NaN ("unavailable") survives.
    pub fn push_kernel_metric(&mut self, m: &KernelMetric) {
        self.push(
            Table::KernelMetric,
            &[
                m.correlation_id,
                m.device.into(),
                m.process.into(),
                m.metric.into(),
                m.value.to_bits(),
            ],
        );
    }

    /// A PM sample's value; its `f64` is stored by its bits, so NaN ("unavailable") survives.
    pub fn push_pm_sample(&mut self, m: &PmSample) {
        self.push(
            Table::PmSample,
            &[
                m.start_ns,
                m.end_ns.wrapping_sub(m.start_ns),
                m.device.into(),
                m.process.into(),
                m.metric.into(),
                m.value.to_bits(),
            ],
        );
    }

    /// A PC's samples for one stall reason; an unknown source file is stored as 0, a known one
    /// as its string id + 1.
    pub fn push_pc_sample(&mut self, p: &PcSample) {
        self.push(
            Table::PcSample,
            &[
                p.device.into(),
                p.process.into(),
                p.correlation_id,
                p.function.into(),
                p.pc_offset,
                p.cubin_crc,
                p.stall_reason.into(),
                p.samples,
                p.function_index.into(),
                p.source_file.map_or(0, |f| u64::from(f) + 1),
                p.source_line.into(),
            ],
        );
    }

    /// An allocation or free (table 11): the place as 0 CPU, 1 GPU, 256 + n for torch's device
    /// type n; the level 0 framework, 1 driver; the op 0 unknown, 1 alloc, 2 free; `known`'s
    /// bits say which of address (1), bytes (2), total allocated (4) and total reserved (8)
    /// the source gave (an unknown one is stored as 0).
    pub fn push_memory(&mut self, m: &MemoryEvent) {
        let known = u64::from(m.address.is_some())
            | u64::from(m.bytes.is_some()) << 1
            | u64::from(m.total_allocated.is_some()) << 2
            | u64::from(m.total_reserved.is_some()) << 3;
        self.push(
            Table::Memory,
            &[
                m.ts_ns,
                m.process.into(),
                m.thread,
                m.device.into(),
                super::memory_place_code(m.place),
                match m.level {
                    MemoryLevel::Framework => 0,
                    MemoryLevel::Driver => 1,
                },
                match m.op {
                    MemoryOp::Unknown => 0,
                    MemoryOp::Alloc => 1,
                    MemoryOp::Free => 2,
                },
                m.address.unwrap_or(0),
                m.bytes.unwrap_or(0),
                m.total_allocated.unwrap_or(0),
                m.total_reserved.unwrap_or(0),
                known,
                m.correlation_id,
            ],
        );
    }

    /// A CUDA memory pool's operation or state (table 12): codes as [`super::pool_op_code`] and
    /// [`super::pool_type_code`] give them, `managed` 0 or 1.
    pub fn push_memory_pool(&mut self, p: &PoolEvent) {
        self.push(
            Table::MemoryPool,
            &[
                p.ts_ns,
                p.process.into(),
                p.device.into(),
                super::pool_op_code(p.op),
                super::pool_type_code(p.pool_type),
                p.address,
                p.size,
                p.utilized,
                p.release_threshold,
                p.min_bytes_to_keep,
                u64::from(p.managed),
                p.block_address,
                p.block_bytes,
                p.correlation_id,
            ],
        );
    }

    /// Writes new strings and every buffered row as chunks, then flushes the output.
    pub fn flush(&mut self) -> io::Result<()> {
        let strings = self.strings.as_slice();
        if self.strings_written < strings.len() {
            let mut p = Vec::new();
            put_varint(&mut p, self.strings_written as u64);
            put_varint(&mut p, (strings.len() - self.strings_written) as u64);
            for s in &strings[self.strings_written..] {
                put_varint(&mut p, s.len() as u64);
                p.extend_from_slice(s.as_bytes());
            }
            let total = strings.len();
            let count = (total - self.strings_written) as u64;
            self.chunk(tag::STRS, &p, Some(count))?;
            self.strings_written = total;
        }
        for table in Table::ALL {
            let Some(flat) = self.rows.get_mut(&table) else {
                continue;
            };
            if flat.is_empty() {
                continue;
            }
            let flat = std::mem::take(flat);
            let rows = (flat.len() / table.ncols()) as u64;
            let payload = encode_table(table, &flat);
            self.chunk(tag::RECS, &payload, Some(rows))?;
        }
        self.pending_rows = 0;
        self.out.flush()
    }

    /// Appends a `META` chunk (devices, drop counters, notes).
    pub fn write_meta(&mut self, meta: &Meta) -> io::Result<()> {
        self.json_chunk(tag::META, meta)?;
        self.out.flush()
    }

    /// Flushes everything and writes the `TAIL` chunk that marks the file complete.
    pub fn finish(mut self, tail: &Tail) -> io::Result<W> {
        self.flush()?;
        let mut t = tail.clone();
        t.records = self.records;
        self.json_chunk(tag::TAIL, &t)?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn json_chunk<T: serde::Serialize>(&mut self, tag: [u8; 4], value: &T) -> io::Result<()> {
        let body = serde_json::to_vec(value).map_err(io::Error::other)?;
        self.chunk(tag, &body, None)
    }

    /// Writes one chunk; one of `rows` rows (or strings) is compressed, and when deflate packs
    /// it denser than a reader takes by default (more than [`ROWS_PER_STORED_BYTE`] rows, or
    /// [`STRING_BYTES_PER_STORED_BYTE`] bytes, per stored byte: records as regular as a loop
    /// of one kernel at a fixed rate do), padded up to that density ([`pad_deflate`]).
    fn chunk(&mut self, tag: [u8; 4], raw: &[u8], rows: Option<u64>) -> io::Result<()> {
        let (codec, stored) = match rows {
            Some(rows) => {
                let mut enc = flate2::write::DeflateEncoder::new(
                    Vec::with_capacity(raw.len() / 4 + 64),
                    flate2::Compression::new(6),
                );
                enc.write_all(raw)?;
                let packed = enc.finish()?;
                // The fewest stored bytes a reader takes for these rows by default.
                let need = rows
                    .div_ceil(ROWS_PER_STORED_BYTE)
                    .max((raw.len() as u64).div_ceil(STRING_BYTES_PER_STORED_BYTE));
                let short = need.saturating_sub(packed.len() as u64);
                if short == 0 || !self.pad {
                    (codec_id::DEFLATE, packed)
                } else {
                    (codec_id::DEFLATE, pad_deflate(&packed, short))
                }
            }
            None => (codec_id::NONE, raw.to_vec()),
        };
        let mut h = [0u8; super::CHUNK_HEADER_LEN];
        h[0..4].copy_from_slice(&tag);
        h[4] = codec;
        h[8..12].copy_from_slice(&(stored.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        h[16..20].copy_from_slice(&crc32fast::hash(&stored).to_le_bytes());
        // One write per chunk keeps a killed writer's last partial chunk detectable by length.
        let mut all = Vec::with_capacity(h.len() + stored.len());
        all.extend_from_slice(&h);
        all.extend_from_slice(&stored);
        self.out.write_all(&all)?;
        self.bytes_written += all.len() as u64;
        Ok(())
    }
}

/// `packed`, a deflate stream, made at least `short` bytes longer by empty stored blocks put in
/// front of it: each is a block header (not final, stored) on its own byte, then LEN 0 and NLEN
/// 0xFFFF (RFC 1951, 3.2.4), 5 bytes that end on a byte boundary and inflate to nothing, so the
/// stream still inflates to the same bytes.
fn pad_deflate(packed: &[u8], short: u64) -> Vec<u8> {
    const EMPTY_STORED: [u8; 5] = [0x00, 0x00, 0x00, 0xFF, 0xFF];
    let blocks = short.div_ceil(EMPTY_STORED.len() as u64) as usize;
    let mut out = Vec::with_capacity(blocks * EMPTY_STORED.len() + packed.len());
    for _ in 0..blocks {
        out.extend_from_slice(&EMPTY_STORED);
    }
    out.extend_from_slice(packed);
    out
}

/// Encodes one table's rows (row-major `flat`) as a `RECS` payload, rows sorted by first column.
fn encode_table(table: Table, flat: &[u64]) -> Vec<u8> {
    let ncols = table.ncols();
    let nrows = flat.len() / ncols;
    let mut order: Vec<usize> = (0..nrows).collect();
    order.sort_by_key(|&r| flat[r * ncols]);
    let mut p = Vec::with_capacity(nrows * ncols + 16);
    p.push(table as u8);
    put_varint(&mut p, nrows as u64);
    put_varint(&mut p, ncols as u64);
    let mut col = Vec::with_capacity(nrows);
    let mut bytes = Vec::with_capacity(nrows * 2);
    for c in 0..ncols {
        col.clear();
        col.extend(order.iter().map(|&r| flat[r * ncols + c]));
        bytes.clear();
        encode_column(&col, &mut bytes);
        put_varint(&mut p, bytes.len() as u64);
        p.extend_from_slice(&bytes);
    }
    p
}

/// CUPTI's CUpti_ActivityMemcpyKind code for a copy kind.
pub fn copy_kind_code(k: CopyKind) -> u64 {
    match k {
        CopyKind::Unknown => 0,
        CopyKind::HtoD => 1,
        CopyKind::DtoH => 2,
        CopyKind::DtoD => 8,
        CopyKind::HtoH => 9,
        CopyKind::PtoP => 10,
    }
}

/// CUPTI's CUpti_ActivitySynchronizationType code.
pub fn sync_kind_code(k: SyncKind) -> u64 {
    match k {
        SyncKind::Unknown => 0,
        SyncKind::EventSynchronize => 1,
        SyncKind::StreamWaitEvent => 2,
        SyncKind::StreamSynchronize => 3,
        SyncKind::ContextSynchronize => 4,
    }
}
