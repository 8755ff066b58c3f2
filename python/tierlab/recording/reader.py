"""Reading a recording: :class:`Recording` opens one, checks ``meta.json`` and reads its
tables, checking every part (its name, that it is a regular file and a readable Parquet file,
its columns, types and values) and naming the part, column and row of a problem."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab import outdir, safeio
from tierlab.recording.schema import ALL_TABLES, META_FILE, RecordingError, arrow_schemas, part_name
from tierlab.recording.validate import (
    castable,
    check_extents,
    check_meta,
    first_true,
    shift_row,
    value_problem,
    with_all_columns,
)

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

_PART = re.compile(r"part-(\d{5,})\.parquet")


@dataclass
class Recording:
    """A recording opened for reading. Use :meth:`Recording.open`."""

    path: Path
    meta: dict[str, Any]
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Recording:
        """Open and validate a recording directory (``meta.json``'s fields; the part names,
        columns and values of a table are checked when it is read)."""
        p = Path(path)
        if not p.exists():
            raise RecordingError(f"{p}: no such recording (directory not found)")
        if not p.is_dir():
            raise RecordingError(f"{p}: a recording is a directory holding {META_FILE}")
        meta_path = p / META_FILE
        if not os.path.lexists(meta_path):
            raise RecordingError(f"{meta_path}: missing; {p} is not a tierlab recording{_hint(p)}")
        raw = safeio.read_bytes(meta_path, safeio.MAX_META_BYTES, RecordingError, META_FILE)
        meta = safeio.loads_json(raw, meta_path, RecordingError)
        return cls(path=p, meta=check_meta(meta, meta_path))

    def parts(self, table: str) -> list[Path]:
        """The Parquet parts of ``table``, in order. Checks their names: parts are
        ``part-NNNNN.parquet`` numbered from 0 without gaps; files starting with ``.`` are
        ignored; anything else in the table's directory is an error."""
        if table not in ALL_TABLES:
            raise KeyError(f"unknown table {table!r} (tables: {', '.join(ALL_TABLES)})")
        d = self.path / table
        if not os.path.lexists(d):
            return []
        if not d.is_dir():
            what = safeio.file_kind(d.stat().st_mode) if d.exists() else "a broken link"
            if d.exists() and d.is_file():
                what = "a file"
            raise RecordingError(
                f"{d}: expected the directory of table `{table}` (Parquet parts), found {what}"
            )
        numbered: dict[int, Path] = {}
        for entry in sorted(d.iterdir()):
            name = entry.name
            if name.startswith("."):
                continue
            m = _PART.fullmatch(name)
            if m is None:
                raise RecordingError(
                    f"{entry}: unexpected in table `{table}` (its parts are named "
                    "part-NNNNN.parquet)"
                )
            index = int(m.group(1))
            if index in numbered:
                raise RecordingError(
                    f"{entry}: part number {index} also used by {numbered[index].name}"
                )
            numbered[index] = entry
        order = sorted(numbered)
        for expected, index in enumerate(order):
            if index != expected:
                raise RecordingError(
                    f"{d / part_name(expected)}: missing (table `{table}` goes on with "
                    f"{numbered[index].name}; parts are numbered from 00000 without gaps)"
                )
        return [numbered[i] for i in order]

    def _read_part(self, table: str, part: Path, index: int) -> pa.Table:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schemas()[table]
        where = str(part)
        fd, _size = safeio.open_regular(part, RecordingError, "Parquet part")
        try:
            with os.fdopen(fd, "rb") as f:
                pf = pq.ParquetFile(f)
                have = pf.schema_arrow
                check_extents(pf.metadata, where)
                missing = [name for name in schema.names if name not in have.names]
                if missing:
                    raise RecordingError(
                        f"{where}: missing column `{missing[0]}` "
                        f"(table {table} needs {', '.join(schema.names)})"
                    )
                for fld in schema:
                    got = have.field(fld.name).type
                    if not castable(got, fld.type):
                        raise RecordingError(
                            f"{where}: column `{fld.name}` has type {got}, expected {fld.type}"
                        )
                t = pf.read(columns=schema.names)
        except RecordingError:
            raise
        except (pa.ArrowException, OSError, ValueError, IndexError, MemoryError) as e:
            text = str(e).strip()
            msg = text.splitlines()[0] if text else type(e).__name__
            raise RecordingError(f"{where}: not a readable Parquet file: {msg[:200]}") from None
        return _checked(table, t, where)

    def _footer(self, table: str, part: Path) -> pq.FileMetaData:
        """A part's footer, checked without decoding its data: a regular file, a readable
        Parquet footer whose row groups have the schema's columns, and the table's columns
        with types the format converts."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schemas()[table]
        where = str(part)
        fd, _size = safeio.open_regular(part, RecordingError, "Parquet part")
        try:
            with os.fdopen(fd, "rb") as f:
                pf = pq.ParquetFile(f)
                md = pf.metadata
                check_extents(md, where)
                have = pf.schema_arrow
        except RecordingError:
            raise
        except (pa.ArrowException, OSError, ValueError, IndexError, MemoryError) as e:
            text = str(e).strip()
            msg = text.splitlines()[0] if text else type(e).__name__
            raise RecordingError(f"{where}: not a readable Parquet file: {msg[:200]}") from None
        for fld in schema:
            if fld.name not in have.names:
                raise RecordingError(
                    f"{where}: missing column `{fld.name}` "
                    f"(table {table} needs {', '.join(schema.names)})"
                )
            got = have.field(fld.name).type
            if not castable(got, fld.type):
                raise RecordingError(
                    f"{where}: column `{fld.name}` has type {got}, expected {fld.type}"
                )
        return md

    def table_rows(self, table: str) -> int:
        """Rows of ``table`` from its parts' footers (each part checked as a file and a
        Parquet footer with the table's columns; nothing decoded). Readers that stream a large
        table themselves (the native view of full traces) check it with this first."""
        parts = self.parts(table)
        rows = sum(int(self._footer(table, part).num_rows) for part in parts)
        if parts:
            self._check_rows(table, rows)
        return rows

    def _check_rows(self, table: str, rows: int) -> None:
        """A complete recording's parts hold the rows ``meta.json`` counts (``tables``): a
        part copied in twice, or one lost, is an error, not more or fewer data."""
        if not self.meta.get("complete", False):
            return  # the recorder stopped early: meta.json may count fewer rows than written
        counted = (self.meta.get("tables") or {}).get(table)
        if isinstance(counted, int) and not isinstance(counted, bool) and counted != rows:
            raise RecordingError(
                f"{self.path / table}: its parts hold {rows} rows, but {META_FILE} (`tables."
                f"{table}`) counts {counted}: a part was added, removed or replaced after the "
                "recording was written"
            )

    def check_streaming(self, table: str, columns: Sequence[str]) -> None:
        """Check ``columns`` of ``table`` part by part and batch by batch (memory bounded by
        a batch, not the table): no nulls, and the values the format allows (``kind`` 0/1).
        For readers that stream a large table themselves."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        for index, part in enumerate(self.parts(table)):
            self._footer(table, part)
            fd, _size = safeio.open_regular(part, RecordingError, "Parquet part")
            row = 0
            try:
                with os.fdopen(fd, "rb") as f:
                    for batch in pq.ParquetFile(f).iter_batches(
                        batch_size=1 << 20, columns=list(columns)
                    ):
                        t = pa.Table.from_batches([batch]).cast(
                            pa.schema([arrow_schemas()[table].field(c) for c in columns])
                        )
                        problem = value_problem(table, with_all_columns(table, t))
                        if problem is not None:
                            raise RecordingError(f"{part}: {shift_row(problem, row)}")
                        row += batch.num_rows
            except RecordingError:
                raise
            except (pa.ArrowException, OSError, ValueError, IndexError, MemoryError) as e:
                text = str(e).strip()
                msg = text.splitlines()[0] if text else type(e).__name__
                raise RecordingError(
                    f"{part}: not a readable Parquet file (part {index}): {msg[:200]}"
                ) from None

    def batches(
        self, table: str, columns: Sequence[str] | None = None, rows: int = 1 << 20
    ) -> Iterator[pa.Table]:
        """``table`` read ``rows`` rows at a time (``columns``, default all), each piece
        checked and cast as :meth:`table` checks a whole part (errors name the part, the
        column and the row within the part): memory for one piece, whatever the table's
        size. The row counts are checked against ``meta.json`` first."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schemas()[table]
        names = list(schema.names if columns is None else columns)
        sub = pa.schema([schema.field(c) for c in names])
        self.table_rows(table)  # every part's footer, and the row count
        for index, part in enumerate(self.parts(table)):
            where = str(part)
            fd, _size = safeio.open_regular(part, RecordingError, "Parquet part")
            row = 0
            try:
                with os.fdopen(fd, "rb") as f:
                    pf = pq.ParquetFile(f)
                    if pf.metadata.num_rows == 0:
                        continue
                    for batch in pf.iter_batches(batch_size=rows, columns=names):
                        t = pa.Table.from_batches([batch])
                        yield _checked(table, t, where, row, sub)
                        row += batch.num_rows
            except RecordingError:
                raise
            except (pa.ArrowException, OSError, ValueError, IndexError, MemoryError) as e:
                text = str(e).strip()
                msg = text.splitlines()[0] if text else type(e).__name__
                raise RecordingError(
                    f"{where}: not a readable Parquet file (part {index}): {msg[:200]}"
                ) from None

    def table(self, table: str) -> pa.Table:
        """Read ``table`` as a pyarrow Table with the format's schema (columns a newer writer
        added are dropped). Every part is checked: its name, that it is a regular file and a
        readable Parquet file whose data lies inside it, the columns and their types, and the
        values (no nulls, ``kind`` 0/1, ``event`` map/unmap, mappings inside the 64-bit
        address space, regions that end after they start); an error names the part, the
        column and the row."""
        import pyarrow as pa

        schema = arrow_schemas()[table]
        pieces = [self._read_part(table, part, i) for i, part in enumerate(self.parts(table))]
        if pieces:  # (a table without a directory reads as empty)
            self._check_rows(table, sum(p.num_rows for p in pieces))
        if not pieces:
            return schema.empty_table()
        return pa.concat_tables(pieces)

    def _frame(self, table: str) -> pd.DataFrame:
        if table not in self._cache:
            # Text columns (a sample's event name, a mapping's name) as categories: one
            # small code per row instead of a string object per row (12 M samples: about
            # 60 bytes a row less); the Arrow buffers are freed as they are converted.
            self._cache[table] = self.table(table).to_pandas(
                strings_to_categorical=True, self_destruct=True, split_blocks=True
            )
        return self._cache[table]

    def frame(self, table: str, library: str = "pandas") -> Any:
        """Table ``table`` (``accesses``, ``samples``, ``mappings``, ...) as a pandas frame,
        or a polars one with ``library="polars"`` (made from the Arrow table, no copy
        through pandas)."""
        if library == "polars":
            import polars as pl

            return pl.from_arrow(self.table(table))
        if library != "pandas":
            raise ValueError(f"library {library!r}: expected 'pandas' or 'polars'")
        return self._frame(table)

    def row_counts(self) -> dict[str, int]:
        """Rows of every table the recording has (from the parts' footers)."""
        return {t: self.table_rows(t) for t in ALL_TABLES if self.parts(t)}

    def __repr__(self) -> str:
        """One line: where, from what, how many rows of each table."""
        try:
            counts = ", ".join(f"{n:,} {t}" for t, n in self.row_counts().items())
        except RecordingError as e:
            counts = f"unreadable: {e}"
        source = self.meta.get("source", "")
        return f"<Recording {self.path} ({source}): {counts or 'empty'}>"

    def _repr_html_(self) -> str:
        import html

        from tierlab.display import html_table

        rows: list[tuple[str, str]] = [("path", str(self.path))]
        rows += [(k, str(self.meta[k])) for k in ("source", "format") if k in self.meta]
        try:
            rows += [(f"{t} rows", f"{n:,}") for t, n in self.row_counts().items()]
        except RecordingError as e:
            rows.append(("error", str(e)))
        return f"<p><b>Recording</b> {html.escape(str(self.path))}</p>" + html_table(rows)

    def accesses(self) -> pd.DataFrame:
        """All accesses (the columns of ``SCHEMAS["accesses"]``)."""
        return self._frame("accesses")

    def samples(self) -> pd.DataFrame:
        """All samples (the columns of ``SCHEMAS["samples"]``)."""
        return self._frame("samples")

    def mappings(self) -> pd.DataFrame:
        """All mapping events (the columns of ``SCHEMAS["mappings"]``)."""
        return self._frame("mappings")

    def drains(self) -> pd.DataFrame:
        """All drains (the columns of ``SCHEMAS["drains"]``)."""
        return self._frame("drains")

    def regions(self) -> pd.DataFrame:
        """Region snapshots, an optional table (the columns of ``SCHEMAS["regions"]``); empty
        when the recording has none."""
        return self._frame("regions")

    def sync(self) -> pd.DataFrame:
        """The program's synchronisation (``tierlab trace --cc``), an optional table (the
        columns of ``SCHEMAS["sync"]``, in ``seq`` order); empty when the recording has none."""
        return self._frame("sync")

    def allocations(self) -> pd.DataFrame:
        """The program's allocation events (``tierlab trace --cc``, ``tierlab record
        --alloc-sites``), an optional table; empty when the recording has none."""
        return self._frame("allocations")

    def alloc_sites(self) -> pd.DataFrame:
        """The call stacks of ``allocations.site``, an optional table; empty without."""
        return self._frame("alloc_sites")


def _checked(
    table: str, t: pa.Table, where: str, row0: int = 0, schema: pa.Schema | None = None
) -> pa.Table:
    """``t`` (rows ``row0``... of a part of ``table``) checked column by column (no nulls,
    integers that fit the format's types, the values the format allows) and cast to the
    format's schema (``schema``: the columns read, default the table's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = schema if schema is not None else arrow_schemas()[table]
    for fld in schema:
        col = t.column(fld.name)
        if col.null_count:
            row = row0 + first_true(pc.is_null(col))
            raise RecordingError(
                f"{where}: column `{fld.name}`: null at row {row} (nulls are not allowed)"
            )
        if pa.types.is_integer(fld.type) and col.type != fld.type and len(col):
            lo, hi = pc.min_max(col).values()
            top = 2**fld.type.bit_width - 1
            if lo.as_py() < 0 or hi.as_py() > top:
                bad = pc.less(col, pa.scalar(0, col.type))
                if hi.as_py() > top:
                    bad = pc.or_(bad, pc.greater(col, pa.scalar(top, pa.uint64())))
                row = first_true(bad)
                raise RecordingError(
                    f"{where}: column `{fld.name}`: {col[row].as_py()} at row {row0 + row} "
                    f"does not fit {fld.type}"
                )
    try:
        t = t.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise RecordingError(f"{where}: values do not fit the format's types: {e}") from None
    whole = len(schema) == len(arrow_schemas()[table])
    problem = value_problem(table, t if whole else with_all_columns(table, t))
    if problem is not None:
        raise RecordingError(f"{where}: {shift_row(problem, row0)}")
    return t


def _hint(path: Path) -> str:
    """What a directory that is not a recording is, when tierlab can tell."""
    kind = outdir.kind_of(path)
    samples = sorted(q.name for q in path.glob("samples-*") if (q / META_FILE).is_file())
    if kind == "run":
        text = " (it is the output of `tierlab run --out`"
        if samples:
            text += "; the recordings in it: " + ", ".join(str(path / s) for s in samples)
        else:
            text += (
                "; a run writes a recording only for sampling techniques (PEBS), as "
                "DIR/samples-LABEL, and this one had none"
            )
        return text + ")"
    if kind == "view":
        return " (it is the output of `tierlab view`: view the recording it was made from)"
    return ""
