"""``tierlab dataset``: its labels against ground truth computed here, from the trace itself.

The replayed key-value trace runs on one thread, in trace order; the run's time series gives
how many accesses each window took, so each access of the trace falls in a known window and
the per-page, per-window counts follow without the engine's ground truth. Every label (the
window's accesses, the next 1, 10 and 100 windows', the optimum's fast set of the next
window) and the rows' Accessed-bit history and age are recomputed from those counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tierlab import _native
from tierlab.api import run_native
from tierlab.cli.main import main

TRACE = Path(__file__).parent.parent / "crates/tierlab-sim/scenarios/traces/kv-zipf"
POINT = "HybridTier"
SETTINGS = ["workload.repeat=2", 'window="5ms"']
HISTORY = 8


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("ds")
    args = ["dataset", "tiering-replay-kv", "--point", POINT, "-o", str(out)]
    for s in SETTINGS:
        args += ["--set", s]
    assert main(args) == 0
    _, points = _native.sweep_points("tiering-replay-kv", [])
    return out, [*dict(points)[POINT], *SETTINGS]


def test_labels_match_ground_truth_from_the_trace(dataset: tuple[Path, list[str]]) -> None:
    out, overrides = dataset
    meta = json.loads((out / "dataset.json").read_text())
    rows = pq.read_table(out / "rows.parquet").to_pandas()
    assert meta["rows"] == len(rows) > 0 and meta["followed_technique"] == "PEBS-HybridTier"

    # The trace, replayed twice, split into the windows the run's time series counts.
    addr = pq.read_table(TRACE / "accesses").column("addr").to_numpy().astype(np.uint64)
    addr = np.tile(addr, 2)
    per_window = np.asarray(run_native("tiering-replay-kv", overrides).timeseries["accesses"])
    per_window = per_window.astype(np.int64)
    assert per_window.sum() == len(addr)
    nw = len(per_window)
    assert meta["windows"] == nw >= 40
    win = np.repeat(np.arange(nw), per_window)
    page = addr // np.uint64(_native.PAGE_SIZE)
    pages, col = np.unique(page, return_inverse=True)
    counts = np.zeros((nw + 100, len(pages)), dtype=np.int64)
    np.add.at(counts, (win, col), 1)

    # Rows: every page accessed in one of its last HISTORY windows, in page order.
    hist = np.zeros((nw, len(pages)), dtype=np.int64)
    for t in range(nw):
        for k in range(HISTORY):
            if t - k >= 0:
                hist[t] |= (counts[t - k] > 0).astype(np.int64) << k
    t_idx, p_idx = np.nonzero(hist)
    assert len(rows) == len(t_idx)
    np.testing.assert_array_equal(rows["window"].to_numpy(), t_idx)
    np.testing.assert_array_equal(
        rows["page"].to_numpy().astype(np.uint64), pages[p_idx] * np.uint64(_native.PAGE_SIZE)
    )
    np.testing.assert_array_equal(rows["abit_history"].to_numpy(), hist[t_idx, p_idx])
    first = np.argmax(counts[:nw] > 0, axis=0)
    np.testing.assert_array_equal(rows["age_windows"].to_numpy(), t_idx - first[p_idx])

    # Labels.
    csum = np.vstack([np.zeros((1, len(pages)), dtype=np.int64), np.cumsum(counts, axis=0)])
    np.testing.assert_array_equal(rows["accesses"].to_numpy(), counts[t_idx, p_idx])
    for k in (1, 10, 100):
        expect = csum[t_idx + 1 + k, p_idx] - csum[t_idx + 1, p_idx]
        np.testing.assert_array_equal(
            rows[f"accesses_next_{k}"].to_numpy(), expect, err_msg=f"next {k}"
        )
    np.testing.assert_array_equal(rows["windows_after"].to_numpy(), nw - 1 - t_idx)
    cap = meta["optimum_fast"]["capacity_pages"]
    best = np.zeros((nw + 1, len(pages)), dtype=bool)
    for t in range(nw):
        c = counts[t]
        touched = np.nonzero(c)[0]
        # The most accessed `cap` pages, ties to the lower page.
        order = touched[np.lexsort((pages[touched], -c[touched]))]
        best[t, order[:cap]] = True
    np.testing.assert_array_equal(rows["optimum_fast_next"].to_numpy(), best[t_idx + 1, p_idx])
    assert rows["optimum_fast_next"].any() and not rows["optimum_fast_next"].all()
    # Features move: HybridTier promotes, PEBS samples arrive.
    assert rows["samples"].sum() > 0 and (rows["node"] == 0).any()
    assert rows["since_migration_windows"].notna().any()


def test_sweep_without_point_and_bad_point_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dataset", "tiering-replay-kv", "-o", str(tmp_path)]) == 2
    assert "--point" in capsys.readouterr().err
    assert main(["dataset", "tiering-replay-kv", "--point", "nope", "-o", str(tmp_path)]) == 2
    assert "no such sweep point" in capsys.readouterr().err
