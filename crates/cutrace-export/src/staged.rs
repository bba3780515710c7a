//! Tables staged together: every file of one export directory is written under a temporary name
//! and renamed into place only when all of them are complete, so a failed export (a full disk)
//! leaves neither a half-written table nor a mix of this export's tables and an older one's.

use std::io::Write;
use std::path::{Path, PathBuf};

use cutrace_trace::Trace;

use crate::files::{OutFile, PlaceError, Placement};
use crate::{csv, outputs, parquet, tables};

/// What stopped a staged export; the OS error, where there is one, is the source.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("creating {0}")]
    Create(PathBuf, #[source] std::io::Error),
    #[error("writing {0}")]
    Write(PathBuf, #[source] std::io::Error),
    #[error("{0} is a directory; move it away (nothing was written)")]
    IsDirectory(PathBuf),
    #[error(transparent)]
    Place(#[from] PlaceError),
}

/// Files written under temporary names in one directory and renamed into place together once
/// every one is complete. Temporary files are removed on failure (each [`OutFile`] removes its
/// own when dropped).
pub struct Staged {
    dir: PathBuf,
    mode: u32,
    files: Vec<OutFile>,
}

impl Staged {
    /// Files in `dir`, created with permission bits `mode`.
    pub fn new(dir: &Path, mode: u32) -> Staged {
        Staged {
            dir: dir.to_owned(),
            mode,
            files: Vec::new(),
        }
    }

    /// A writer for `name` in the directory, and the path the file will finally have.
    pub fn create(
        &mut self,
        name: &str,
    ) -> Result<(PathBuf, std::io::BufWriter<&mut std::fs::File>), StageError> {
        let fin = self.dir.join(name);
        let f = OutFile::create(&fin, self.mode).map_err(|e| StageError::Create(fin.clone(), e))?;
        self.files.push(f);
        let f = self.files.last_mut().expect("just pushed");
        Ok((fin, std::io::BufWriter::new(f.file())))
    }

    /// Stages `bytes` as the file `name`.
    pub fn write(&mut self, name: &str, bytes: &[u8]) -> Result<(), StageError> {
        let (fin, mut f) = self.create(name)?;
        f.write_all(bytes)
            .and_then(|()| f.flush())
            .map_err(|e| StageError::Write(fin, e))
    }

    /// Stages every table of `t` as CSV.
    pub fn csv_tables(&mut self, t: &Trace) -> Result<(), StageError> {
        for name in tables::names_for(t) {
            let (p, mut f) = self.create(&format!("{name}.csv"))?;
            csv::write(&mut f, &tables::build(t, name))
                .and_then(|()| f.flush())
                .map_err(|e| StageError::Write(p, e))?;
        }
        Ok(())
    }

    /// Stages every table of `t` as a Parquet file, each carrying `meta` (meta.json's text).
    pub fn parquet_tables(&mut self, t: &Trace, meta: &str) -> Result<(), StageError> {
        for name in tables::names_for(t) {
            let (p, mut f) = self.create(&format!("{name}.parquet"))?;
            parquet::write(&mut f, &tables::build(t, name), meta)
                .and_then(|()| f.flush())
                .map_err(|e| StageError::Write(p, e))?;
        }
        Ok(())
    }

    /// Puts every staged file in place together ([`Placement`]): with `replace` (`--force`),
    /// what an earlier export left in the directory (tables of either format, meta.json, a job's
    /// partition directories) is removed; without it, any of that is an error. Returns what was
    /// removed of an earlier export and not written anew.
    pub fn commit(self, replace: bool) -> Result<Vec<String>, StageError> {
        // A directory where a table goes stops them all, before anything is moved (a rename
        // onto it would fail half-way).
        if let Some(f) = self
            .files
            .iter()
            .find(|f| std::fs::symlink_metadata(f.dest()).is_ok_and(|m| m.is_dir()))
        {
            return Err(StageError::IsDirectory(f.dest().to_owned()));
        }
        let mut place = Placement::begin(&self.dir, replace, outputs::tables_in)?;
        // On a failure the files not yet put in place are dropped, which removes them, and the
        // placement undoes itself.
        for f in self.files {
            place.put_file(f)?;
        }
        Ok(place.finish()?)
    }
}
