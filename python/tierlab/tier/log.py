"""The decision log of ``tierlab tier``: the table ``tier`` of a recording directory
(``REC/tier/part-NNNNN.parquet``, one part per loop step, each written atomically) and the
``tier`` field of ``meta.json`` (parameters, totals, why it stopped).

One row per page per event (columns in :data:`COLUMNS`):

- ``kind = "decide"``: the policy chose to ``promote`` (to the fast node) or ``demote`` (to the
  slow node) page ``addr`` with ``score`` (its decayed sample count) at step ``step``;
- ``kind = "move"``: the page went into ``move_pages`` batch ``batch`` (``outcome``: moved,
  there = already on that node, absent, busy, failed; ``errno`` for the last three), or, with
  ``--dry-run``, would have (``outcome = "dry-run"``);
- ``kind = "drop"``: the page was no longer inside the target's mappings when its batch was
  built (``outcome = "unmapped"``) and was not passed to the kernel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: The table's directory inside the recording.
TABLE = "tier"

COLUMNS = pa.schema(
    [
        ("time_ns", pa.uint64()),
        ("step", pa.uint32()),
        ("batch", pa.int64()),
        ("kind", pa.string()),
        ("action", pa.string()),
        ("addr", pa.uint64()),
        ("node", pa.int32()),
        ("score", pa.float64()),
        ("outcome", pa.string()),
        ("errno", pa.int32()),
    ]
)


class DecisionLog:
    """Buffers rows and writes them as numbered Parquet parts under ``dir/tier``."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory) / TABLE
        self.dir.mkdir(parents=True, exist_ok=True)
        self.parts = 0
        self.rows = 0
        self._buf: dict[str, list[Any]] = {name: [] for name in COLUMNS.names}

    def add(
        self,
        time_ns: int,
        step: int,
        batch: int,
        kind: str,
        action: str,
        addr: np.ndarray,
        node: int,
        score: np.ndarray | float = 0.0,
        outcome: list[str] | str = "",
        errno: np.ndarray | int = 0,
    ) -> None:
        n = int(np.asarray(addr).size)
        if n == 0:
            return
        b = self._buf
        b["time_ns"].append(np.full(n, time_ns, dtype=np.uint64))
        b["step"].append(np.full(n, step, dtype=np.uint32))
        b["batch"].append(np.full(n, batch, dtype=np.int64))
        b["kind"].append([kind] * n)
        b["action"].append([action] * n)
        b["addr"].append(np.asarray(addr, dtype=np.uint64))
        b["node"].append(np.full(n, node, dtype=np.int32))
        b["score"].append(np.broadcast_to(np.asarray(score, dtype=np.float64), (n,)))
        b["outcome"].append([outcome] * n if isinstance(outcome, str) else list(outcome))
        b["errno"].append(np.broadcast_to(np.asarray(errno, dtype=np.int32), (n,)))

    def flush(self) -> None:
        if not self._buf["addr"]:
            return
        cols: dict[str, Any] = {}
        for name in COLUMNS.names:
            parts = self._buf[name]
            if name in ("kind", "action", "outcome"):
                cols[name] = [x for p in parts for x in p]
            else:
                cols[name] = np.concatenate(parts)
            self._buf[name] = []
        table = pa.table(cols, schema=COLUMNS)
        final = self.dir / f"part-{self.parts:05d}.parquet"
        tmp = final.with_name(f".{final.name}.tmp")
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, final)
        self.parts += 1
        self.rows += table.num_rows


def read(rec: Path) -> pd.DataFrame | None:
    """The decision log of recording ``rec`` (``None`` when it has none)."""
    d = Path(rec) / TABLE
    if not d.is_dir():
        return None
    parts = sorted(p for p in d.glob("part-*.parquet"))
    if not parts:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in COLUMNS.names})
    df: pd.DataFrame = pa.concat_tables(pq.read_table(p, schema=COLUMNS) for p in parts).to_pandas()
    return df


def summary(rec: Path, meta: dict[str, Any] | None = None, bins: int = 20) -> dict[str, Any] | None:
    """Totals and promotions/demotions over time (``bins`` time bins) of ``rec``'s decision
    log, or ``None`` when it has none."""
    df = read(rec)
    if df is None:
        return None
    out: dict[str, Any] = {"rows": len(df)}
    if meta is not None and isinstance(meta.get("tier"), dict):
        out["stop"] = meta["tier"].get("stop")
        out["parameters"] = meta["tier"].get("parameters")
    dec = df[df["kind"] == "decide"]
    mov = df[df["kind"] == "move"]
    out["steps"] = int(df["step"].max()) + 1 if len(df) else 0
    out["decided"] = {a: int((dec["action"] == a).sum()) for a in ("promote", "demote")}
    out["moves"] = {
        a: {str(k): int(v) for k, v in mov[mov["action"] == a]["outcome"].value_counts().items()}
        for a in ("promote", "demote")
    }
    out["dropped_unmapped"] = int((df["kind"] == "drop").sum())
    out["batches"] = int(mov["batch"].nunique()) if len(mov) else 0
    series: list[dict[str, Any]] = []
    if len(dec):
        t = dec["time_ns"].to_numpy(dtype=np.float64)
        lo, hi = float(t.min()), float(t.max())
        edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
        for action in ("promote", "demote"):
            sel = dec["action"].to_numpy() == action
            counts, _ = np.histogram(t[sel], bins=edges)
            for i, c in enumerate(counts.tolist()):
                if len(series) <= i:
                    series.append({"t0_ns": int(edges[i]), "t1_ns": int(edges[i + 1])})
                series[i][action] = int(c)
    out["over_time"] = series
    return out


def plot(rec: Path, out: Path, meta: dict[str, Any] | None = None) -> Path | None:
    """``out/tier.png``: pages decided for promotion and demotion per step, and moved."""
    df = read(rec)
    if df is None or not len(df):
        return None
    from tierlab.plots import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 3.2))
    for kind, action, style in (
        ("decide", "promote", "-"),
        ("decide", "demote", "-"),
        ("move", "promote", ":"),
        ("move", "demote", ":"),
    ):
        sel = df[(df["kind"] == kind) & (df["action"] == action)]
        if kind == "move":
            sel = sel[sel["outcome"].isin(["moved", "there", "placed", "dry-run"])]
        g = sel.groupby("step")["time_ns"].agg(["min", "size"])
        if len(g):
            ax.plot(g["min"] / 1e9, g["size"], style, marker=".", label=f"{action} ({kind})")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("pages per step")
    ax.set_title("tierlab tier: decisions and moves")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tier.png"
    from tierlab.plots import finish

    finish(fig)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def describe(s: dict[str, Any]) -> str:
    """The summary as lines of text (``tierlab view``)."""

    def outcomes(action: str) -> str:
        o = s["moves"].get(action) or {}
        return ", ".join(f"{k} {v}" for k, v in sorted(o.items())) or "none"

    lines = [
        f"tiering decision log: {s['steps']} steps, decided {s['decided']['promote']} "
        f"promotions and {s['decided']['demote']} demotions; {s['batches']} batches "
        f"(promotions: {outcomes('promote')}; demotions: {outcomes('demote')}); "
        f"{s['dropped_unmapped']} pages dropped as unmapped"
    ]
    stop = s.get("stop") or {}
    if stop:
        lines.append(f"  stopped: {stop.get('reason')} after {stop.get('batches')} batches")
    busy = [b for b in s["over_time"] if b.get("promote") or b.get("demote")]
    for b in busy[:20]:
        lines.append(
            f"  {b['t0_ns'] / 1e9:8.3f}-{b['t1_ns'] / 1e9:8.3f} s: promote {b.get('promote', 0)}, "
            f"demote {b.get('demote', 0)}"
        )
    return "\n".join(lines)
