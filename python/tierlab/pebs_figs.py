"""The PEBS paper's Figs. 6 and 7 from the recordings of ``tierlab telemetry pebs-minife --out``.

Fig. 6 is the distribution of the time between PEBS interrupts (drains) for each reset value;
Fig. 7 the histogram of pages by their number of samples (the paper: "aggregated L2
misses"). Both are read from the samples the PEBS model recorded (``samples-NAME/``), nothing
is fitted. To explain the shape, every interval is classified by what the samples drained at
its end touched: whether any came from the CG's vector phase (loads of ``Ap``, ``r`` or
``x``, which the SpMV does not load: it gathers ``p`` and stores ``Ap``), and every page by its
mapping (matrix or vector).

    .venv/bin/python -m tierlab.pebs_figs DIR [--out OUTDIR]

reads ``DIR/samples-*`` and writes ``pebs-fig6.png``, ``pebs-fig7.png`` and
``pebs-figs.json`` (the numbers quoted in ``docs/telemetry.md``) into OUTDIR (default DIR).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: The CG's matrix arrays (streamed once per iteration); every other mapping is a vector.
MATRIX = ("row_ptr", "col_idx", "values")
#: Vectors the SpMV does not load: a sample on them was taken in the vector phase.
VECTOR_PHASE = ("Ap", "r", "x")
PAGE = 4096


def _reset(name: str) -> int:
    m = re.search(r"R(\d+)", name)
    return int(m.group(1)) if m else 0


def analyse(rec_dir: Path) -> dict[str, Any]:
    """Intervals between drains and samples per page of one recording."""
    from tierlab.recording import Recording

    rec = Recording.open(rec_dir)
    s = rec.samples()
    maps = rec.mappings()
    maps = maps[maps["event"] == "map"] if "event" in maps else maps
    starts = maps["start"].to_numpy(dtype=np.uint64)
    order = np.argsort(starts)
    starts = starts[order]
    ends = starts + maps["length"].to_numpy(dtype=np.uint64)[order]
    names = maps["name"].to_numpy()[order]
    addr = s["addr"].to_numpy(dtype=np.uint64)
    idx = np.searchsorted(starts, addr, side="right") - 1
    ok = (idx >= 0) & (addr < ends[np.maximum(idx, 0)])
    mapping = np.where(ok, names[np.maximum(idx, 0)], "")
    is_matrix = np.isin(mapping, MATRIX)
    d = rec.drains().sort_values("time_ns")
    t = d["time_ns"].to_numpy(dtype=np.int64)
    gaps_us = np.diff(t) / 1e3
    # Per drain: the share of its samples taken in the vector phase.
    vec = pd.Series(np.isin(mapping, VECTOR_PHASE)).groupby(s["drain"].to_numpy()).mean()
    vec_share = vec.reindex(d["drain"].to_numpy()[1:]).fillna(0).to_numpy()
    page = addr // PAGE
    per_page = (
        pd.DataFrame({"page": page[ok], "matrix": is_matrix[ok], "mapping": mapping[ok]})
        .groupby("page")
        .agg(n=("matrix", "size"), matrix=("matrix", "first"), mapping=("mapping", "first"))
    )
    return {"gaps_us": gaps_us, "vec_share": vec_share, "per_page": per_page}


def _peaks(x: np.ndarray, bins: int = 60) -> list[float]:
    """Local maxima of the histogram holding at least 5% of the values (bin centres)."""
    if x.size < 10:
        return []
    h, e = np.histogram(x, bins=bins)
    c = (e[:-1] + e[1:]) / 2
    out = []
    for i in range(len(h)):
        left = h[i - 1] if i > 0 else -1
        right = h[i + 1] if i + 1 < len(h) else -1
        if h[i] > left and h[i] >= right and h[i] >= 0.05 * x.size:
            out.append(round(float(c[i]), 1))
    return out


def summarise(res: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, r in res.items():
        g, v, pp = r["gaps_us"], r["vec_share"], r["per_page"]
        mixed = v > 0
        n = pp["n"].to_numpy()
        out[name] = {
            "drains": int(g.size + 1),
            "interval_mean_us": round(float(g.mean()), 1) if g.size else None,
            "interval_median_us": round(float(np.median(g)), 1) if g.size else None,
            "interval_peaks_us": _peaks(g),
            "intervals_with_vector_phase_samples": int(mixed.sum()),
            "interval_median_spmv_only_us": round(float(np.median(g[~mixed])), 1)
            if (~mixed).any()
            else None,
            "interval_median_with_vector_phase_us": round(float(np.median(g[mixed])), 1)
            if mixed.any()
            else None,
            "pages_seen": int(n.size),
            "samples_per_page_median": float(np.median(n)) if n.size else 0.0,
            "samples_per_page_max": int(n.max()) if n.size else 0,
            "pages_above_50": int((n > 50).sum()),
            "pages_above_1_5x_median": int((n > 1.5 * np.median(n)).sum()) if n.size else 0,
            "matrix_pages_median": float(np.median(n[pp["matrix"].to_numpy()]))
            if pp["matrix"].any()
            else 0.0,
            "mean_samples_per_page_by_mapping": {
                k: round(float(v), 1) for k, v in pp.groupby("mapping")["n"].mean().items()
            },
            "vector_pages_median": float(np.median(n[~pp["matrix"].to_numpy()]))
            if (~pp["matrix"]).any()
            else 0.0,
        }
    return out


def plot(res: dict[str, dict[str, Any]], out: Path) -> list[str]:
    from tierlab.plots import finish, pyplot

    plt = pyplot()

    names = sorted(res, key=_reset)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        g, v = res[name]["gaps_us"] / 1e3, res[name]["vec_share"]
        mixed = v > 0
        bins = np.histogram_bin_edges(g, bins=50) if g.size else 10
        ax.hist(
            [g[~mixed], g[mixed]],
            bins=bins,
            stacked=True,
            color=["#a8553b", "#3b6ea8"],
            label=["SpMV only", "spans the vector phase (Ap, r, x loads)"],
        )
        ax.set_title(f"{name}: time between interrupts", fontsize=10)
        ax.set_xlabel("interval (ms)")
        ax.set_ylabel("interrupts")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    files = []
    finish(fig)
    fig.savefig(out / "pebs-fig6.png", dpi=100)
    files.append("pebs-fig6.png")
    plt.close(fig)

    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        pp = res[name]["per_page"]
        m = pp["matrix"].to_numpy()
        n = pp["n"].to_numpy()
        top = int(n.max()) if n.size else 1
        bins = np.arange(0, top + 2) if top <= 120 else np.linspace(0, top + 1, 100)
        ax.hist(
            [n[m], n[~m]],
            bins=bins,
            stacked=True,
            color=["#a8553b", "#3b6ea8"],
            label=["matrix pages", "vector pages"],
        )
        ax.axvline(50, color="k", lw=0.8, ls="--")
        ax.set_title(f"{name}: pages by samples (L2 misses)", fontsize=10)
        ax.set_xlabel("samples per page (N)")
        ax.set_ylabel("pages with N")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    finish(fig)
    fig.savefig(out / "pebs-fig7.png", dpi=100)
    files.append("pebs-fig7.png")
    plt.close(fig)
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tierlab.pebs_figs", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "dir", type=Path, help="output directory of `tierlab telemetry pebs-minife --out`"
    )
    ap.add_argument("--out", type=Path, help="where to write the figures (default: DIR)")
    a = ap.parse_args(argv)
    recs = sorted(a.dir.glob("samples-*"))
    if not recs:
        ap.error(
            f"{a.dir}: no samples-NAME/ recordings (run `tierlab telemetry ... --out {a.dir}`)"
        )
    res = {p.name.removeprefix("samples-"): analyse(p) for p in recs}
    out = a.out or a.dir
    out.mkdir(parents=True, exist_ok=True)
    files = plot(res, out)
    summary = summarise(res)
    (out / "pebs-figs.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {', '.join(files)}, pebs-figs.json to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
