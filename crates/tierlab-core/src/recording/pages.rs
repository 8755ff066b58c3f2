//! A bound on what a Parquet part's pages may decompress to, checked before the parquet
//! crate decodes them.
//!
//! The crate allocates a page's buffer from the `uncompressed_page_size` of its page header
//! (up to 2 GiB per page, once per column read) before it decompresses anything, and offers
//! no hook to refuse a size: so the readers walk the page headers of every column chunk they
//! are about to decode themselves (a few bytes per page, against megabytes of values) and
//! refuse a page that declares more than [`MAX_PAGE_BYTES`] with an error naming the part,
//! the row group, the column and the page's offset. A compression bomb can expand no further
//! than the size it declares: the crate's zstd, snappy and LZ4 decoders write into a buffer
//! of that size, and the legacy LZ4 fallback that decodes without a bound is turned off
//! ([`reader_options`]).
//!
//! The page headers are Thrift compact-protocol structs (`PageHeader` of parquet-format:
//! field 2 `uncompressed_page_size`, field 3 `compressed_page_size`, both i32); the walker
//! below reads those two and skips every other field.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use parquet::file::metadata::ColumnChunkMetaData;

use super::{RecordingError, Result};

/// Most bytes one page of a Parquet part may declare uncompressed (256 MiB). tierlab's
/// writers and pyarrow write pages of about 1 MiB; a larger declaration is a corrupt or
/// crafted part, refused before anything is allocated for it.
pub const MAX_PAGE_BYTES: u64 = 256 << 20;

/// Deepest nesting of Thrift structs, lists and maps in a page header (parquet-format's are
/// 4 deep; a deeper one is not a page header).
const MAX_DEPTH: u32 = 32;

/// Options of the parquet crate's reader used for every part: the LZ4 codec without its
/// "backward compatible" fallback to the LZ4 frame decoder, which writes whatever a frame
/// expands to without a bound.
pub fn reader_options() -> parquet::file::serialized_reader::ReadOptions {
    let props =
        parquet::file::properties::ReaderProperties::builder().set_backward_compatible_lz4(false).build();
    parquet::file::serialized_reader::ReadOptionsBuilder::new().with_reader_properties(props).build()
}

/// Thrift compact-protocol reader over a page header's bytes, counting what it consumed.
struct Compact<R> {
    r: R,
    read: u64,
}

type Step<T> = std::result::Result<T, String>;

impl<R: Read> Compact<R> {
    fn byte(&mut self) -> Step<u8> {
        let mut b = [0u8; 1];
        self.r.read_exact(&mut b).map_err(|_| "ends inside the page header".to_string())?;
        self.read += 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> Step<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift.min(63);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint of more than 10 bytes".into())
    }

    fn zigzag(&mut self) -> Step<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn skip_bytes(&mut self, n: u64) -> Step<()> {
        let got = std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink())
            .map_err(|e| format!("unreadable: {e}"))?;
        self.read += got;
        if got != n {
            return Err("ends inside the page header".into());
        }
        Ok(())
    }

    /// Skip a value of compact type `ty`; `elem`: an element of a list, set or map (where a
    /// bool takes a byte of its own).
    fn skip(&mut self, ty: u8, elem: bool, depth: u32) -> Step<()> {
        if depth > MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} deep"));
        }
        match ty {
            1 | 2 if elem => self.skip_bytes(1),
            1 | 2 => Ok(()),
            3 => self.skip_bytes(1),
            4..=6 => self.varint().map(|_| ()),
            7 => self.skip_bytes(8),
            8 => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                let n = if h >> 4 == 15 { self.varint()? } else { u64::from(h >> 4) };
                for _ in 0..n {
                    self.skip(h & 0x0f, true, depth + 1)?;
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n > 0 {
                    let kv = self.byte()?;
                    for _ in 0..n {
                        self.skip(kv >> 4, true, depth + 1)?;
                        self.skip(kv & 0x0f, true, depth + 1)?;
                    }
                }
                Ok(())
            }
            12 => {
                while let Some((_, t, _)) = self.field()? {
                    self.skip(t, false, depth + 1)?;
                }
                Ok(())
            }
            13 => self.skip_bytes(16),
            t => Err(format!("unknown Thrift type {t}")),
        }
    }

    /// The next field header of a struct, `None` at its end: `(id, type, absolute)`, the id
    /// a delta from the previous field's unless `absolute`.
    fn field(&mut self) -> Step<Option<(i64, u8, bool)>> {
        let b = self.byte()?;
        let ty = b & 0x0f;
        if ty == 0 {
            return Ok(None);
        }
        match i64::from(b >> 4) {
            0 => Ok(Some((self.zigzag()?, ty, true))),
            delta => Ok(Some((delta, ty, false))),
        }
    }

    /// A `PageHeader`: its `(uncompressed_page_size, compressed_page_size)`, and the header's
    /// length in bytes in `self.read`.
    fn page_header(&mut self) -> Step<(i64, i64)> {
        let (mut id, mut unc, mut comp) = (0i64, None, None);
        while let Some((d, ty, abs)) = self.field()? {
            id = if abs { d } else { id + d };
            match (id, ty) {
                (2, 5) => unc = Some(self.zigzag()?),
                (3, 5) => comp = Some(self.zigzag()?),
                _ => self.skip(ty, false, 1)?,
            }
        }
        match (unc, comp) {
            (Some(u), Some(c)) => Ok((u, c)),
            _ => Err("a page header without its sizes".into()),
        }
    }
}

/// Walk the page headers of column chunk `col` (of row group `rg`, column `name`) of part
/// `path` (open as `file`) and refuse a page that declares more than `max` bytes
/// uncompressed, or a chunk outside the file. Headers the walk cannot follow (a negative or
/// overlong page size) end it: the crate's reader reports those.
pub fn check_chunk(
    file: &File,
    path: &Path,
    rg: usize,
    col: &ColumnChunkMetaData,
    name: &str,
    max: u64,
) -> Result<()> {
    let shown = path.display().to_string();
    let err = |msg: String| RecordingError {
        file: shown.clone(),
        record: None,
        field: Some(name.to_string()),
        msg: format!("row group {rg}: {msg}"),
    };
    let start = col.dictionary_page_offset().unwrap_or(col.data_page_offset());
    let len = col.compressed_size();
    let file_len =
        file.metadata().map_err(|e| RecordingError::file(&shown, format!("cannot read: {e}")))?.len();
    let (Ok(start), Ok(len)) = (u64::try_from(start), u64::try_from(len)) else {
        return Err(err(format!("column chunk at byte {start} of {len} bytes: not a place in the file")));
    };
    let end = start.checked_add(len).filter(|&e| e <= file_len).ok_or_else(|| {
        err(format!(
            "column chunk at byte {start} of {len} bytes ends past the end of the file ({file_len} bytes)"
        ))
    })?;
    let mut r =
        BufReader::with_capacity(4096, file.try_clone().map_err(|e| err(format!("cannot read: {e}")))?);
    r.seek(SeekFrom::Start(start)).map_err(|e| err(format!("cannot read: {e}")))?;
    let mut pos = start;
    while pos < end {
        let mut c = Compact { r: (&mut r).take(end - pos), read: 0 };
        let (unc, comp) =
            c.page_header().map_err(|m| err(format!("page header at byte {pos} unreadable: {m}")))?;
        if unc > 0 && unc as u64 > max {
            return Err(err(format!(
                "page at byte {pos} declares {unc} bytes uncompressed, more than a page may have \
                 ({max}); refusing to decompress it"
            )));
        }
        let next = u64::try_from(comp).ok().and_then(|comp| pos.checked_add(c.read)?.checked_add(comp));
        match next {
            Some(n) if unc >= 0 && n <= end => {
                r.seek_relative(comp).map_err(|e| err(format!("cannot read: {e}")))?;
                pos = n;
            }
            _ => break,
        }
    }
    Ok(())
}
