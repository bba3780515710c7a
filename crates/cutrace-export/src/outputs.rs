//! The output side of `cutrace convert`: where each export goes, which table files a directory
//! holds, and the export file itself (stdout, a plain file or a gzip one, created exclusively
//! under a random name and put in place once complete). What may be asked of them is checked in
//! `convert.rs`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::files::{resolve, OutFile};
use crate::tables;

/// `-`: the export goes to stdout (--chrome and --perfetto).
pub fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// An output path for a summary line.
pub fn shown(out: &Path) -> String {
    if is_stdout(out) {
        "stdout".into()
    } else {
        out.display().to_string()
    }
}

/// Every name a table directory's export may hold: each table in both formats, and meta.json.
pub fn table_file_names() -> impl Iterator<Item = String> {
    tables::ALL_NAMES
        .iter()
        .flat_map(|n| [format!("{n}.csv"), format!("{n}.parquet")])
        .chain(["meta.json".to_string()])
}

/// The entries of a cutrace export that `dir` holds now, each one path component: table files
/// of either format and meta.json (a directory of such a name is not one), and a job's partition
/// directories (`kernels`, …, `meta`) laid out as a job export lays them out (nothing but
/// `rank=N` directories: a user's own `meta/` is not one). A link at any of those names is one,
/// whatever it points to: it is replaced, never followed.
pub fn tables_in(dir: &Path) -> Vec<String> {
    let is_entry = |n: &String, file: bool| {
        std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| {
            let t = m.file_type();
            t.is_symlink()
                || if file {
                    !t.is_dir()
                } else {
                    is_partition_dir(&dir.join(n))
                }
        })
    };
    table_file_names()
        .filter(|n| is_entry(n, true))
        .chain(
            partition_names()
                .map(str::to_owned)
                .filter(|n| is_entry(n, false)),
        )
        .collect()
}

/// Whether `p` is laid out as a job export's partition directory: not empty, and nothing in it
/// but `rank=N` directories.
fn is_partition_dir(p: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(p) else {
        return false;
    };
    let mut any = false;
    for e in rd {
        let Ok(e) = e else { return false };
        let name = e.file_name();
        let rank = name
            .to_str()
            .and_then(|n| n.strip_prefix("rank="))
            .is_some_and(|r| r.parse::<u32>().is_ok());
        if !rank || !e.file_type().is_ok_and(|t| t.is_dir()) {
            return false;
        }
        any = true;
    }
    any
}

/// The directory beside a job export's tables that holds each rank's `meta.json`.
pub const META_DIR: &str = "meta";

/// The names of a job export's directories: each table's, and [`META_DIR`].
pub fn partition_names() -> impl Iterator<Item = &'static str> {
    tables::ALL_NAMES.iter().copied().chain([META_DIR])
}

/// One table directory and the formats written to it (--csv and --parquet may name one).
#[derive(Debug, Clone)]
pub struct TableGroup {
    pub dir: PathBuf,
    pub csv: bool,
    pub parquet: bool,
}

impl TableGroup {
    pub fn flags(&self) -> &'static str {
        match (self.csv, self.parquet) {
            (true, true) => "--csv/--parquet",
            (true, false) => "--csv",
            _ => "--parquet",
        }
    }
}

/// The table directories to write, in order (--csv's first), one per directory.
pub fn table_groups(csv_dir: Option<&PathBuf>, parquet_dir: Option<&PathBuf>) -> Vec<TableGroup> {
    let mut groups: Vec<TableGroup> = Vec::new();
    for (csv, dir) in [(true, csv_dir), (false, parquet_dir)] {
        let Some(dir) = dir else { continue };
        match groups.iter_mut().find(|g| resolve(&g.dir) == resolve(dir)) {
            Some(g) => g.parquet = true,
            None => groups.push(TableGroup {
                dir: dir.clone(),
                csv,
                parquet: !csv,
            }),
        }
    }
    groups
}

/// The output file, gzip-compressed when its name ends in `.gz`.
pub enum Output {
    Stdout(std::io::BufWriter<std::io::Stdout>),
    Plain(std::io::BufWriter<OutFile>),
    Gzip(Box<std::io::BufWriter<flate2::write::GzEncoder<std::io::BufWriter<OutFile>>>>),
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Output::Stdout(w) => w.write(buf),
            Output::Plain(w) => w.write(buf),
            Output::Gzip(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Output::Stdout(w) => w.write_all(buf),
            Output::Plain(w) => w.write_all(buf),
            Output::Gzip(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Stdout(w) => w.flush(),
            Output::Plain(w) => w.flush(),
            Output::Gzip(w) => w.flush(),
        }
    }
}

impl Output {
    /// Completes the output; a file's is returned for its commit (`None` for stdout).
    pub fn finish(self) -> std::io::Result<Option<OutFile>> {
        let file = match self {
            Output::Stdout(mut w) => return w.flush().map(|()| None),
            Output::Plain(w) => w,
            Output::Gzip(w) => w.into_inner().map_err(|e| e.into_error())?.finish()?,
        };
        file.into_inner().map(Some).map_err(|e| e.into_error())
    }

    /// The export file for `out`: stdout for `-`; else a new file beside it (exclusive create,
    /// random name, permission bits `mode`), gzip-compressed when the name ends in `.gz`.
    pub fn open(out: &Path, mode: u32) -> std::io::Result<Output> {
        if is_stdout(out) {
            let w = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout());
            return Ok(Output::Stdout(w));
        }
        let file = std::io::BufWriter::with_capacity(1 << 20, OutFile::create(out, mode)?);
        let gz = out
            .extension()
            .is_some_and(|x| x.eq_ignore_ascii_case("gz"));
        Ok(if gz {
            let enc = flate2::write::GzEncoder::new(file, flate2::Compression::new(3));
            Output::Gzip(Box::new(std::io::BufWriter::with_capacity(1 << 20, enc)))
        } else {
            Output::Plain(file)
        })
    }
}
