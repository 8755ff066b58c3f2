"""The PEBS model's samples as recordings: `tierlab telemetry pebs-minife --out` writes one
recording per technique that `tierlab view` reads like a live one, and `tierlab run --out`
does the same for a single PEBS technique."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from conftest import tierlab


def test_pebs_minife_writes_recordings_that_view_reads(tmp_path: Path) -> None:
    out = tmp_path / "pm"
    res = tierlab(
        "telemetry", "pebs-minife", "--techniques", "R256-B32K,R64-B8K", "--no-baseline",
        "--out", out,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out / "telemetry.csv").set_index("technique")
    # The paper's trend: a larger reset value sees fewer pages, fewer samples.
    assert table.loc["R64-B8K", "pages_seen"] > table.loc["R256-B32K", "pages_seen"]
    assert table.loc["R64-B8K", "samples"] > 3 * table.loc["R256-B32K", "samples"]
    # A buffer of 32 KiB holds 170 records: a drain every 153 (90%) samples, so few interrupts.
    assert table.loc["R64-B8K", "interrupts"] > 3 * table.loc["R256-B32K", "interrupts"]
    for tech in ("R64-B8K", "R256-B32K"):
        rec = out / f"samples-{tech}"
        meta = json.loads((rec / "meta.json").read_text())
        assert meta["complete"] is True and meta["source"] == "tierlab-sim"
        # `tierlab view` reads it (the numbers only: `--out` drew the view from it already,
        # with the same analysis and renderer, into view-TECH/; checked below).
        v = tierlab("view", rec, "--json")
        assert v.returncode == 0, v.stderr
        doc = v.json()
        # Every sample the model took is in the recording (the buffers are flushed at the end)
        # and lands in one of the run's mappings.
        assert doc["totals"]["samples"] == table.loc[tech, "samples"]
        assert sum(m["samples"] for m in doc["mappings"]) == doc["totals"]["samples"]
        touched = sum(m["pages_touched"] for m in doc["mappings"])
        assert touched == table.loc[tech, "pages_seen"]
        # One drain per interrupt plus the end-of-run flush of the partly filled buffer.
        assert doc["totals"]["drains"] in (
            table.loc[tech, "interrupts"],
            table.loc[tech, "interrupts"] + 1,
        )
        assert (out / f"view-{tech}" / "index.html").is_file()
        drawn = json.loads((out / f"view-{tech}" / "view.json").read_text())
        assert drawn["totals"] == doc["totals"]


def test_pebs_minife_overhead_falls_with_larger_r_and_b() -> None:
    """MiniFE is fixed work: interrupts make it finish later. Overhead (slowdown against the
    run without PEBS) is positive and falls with a larger reset value R and buffer B."""
    res = tierlab(
        "telemetry", "pebs-minife", "--techniques", "R64-B8K,R64-B32K,R256-B8K", "--json",
        timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    t = res.json()["techniques"]
    slow = {name: t[name]["slowdown"] for name in t}
    assert all(s > 0 for s in slow.values()), slow
    assert slow["R64-B8K"] > slow["R64-B32K"], "a larger buffer interrupts less often"
    assert slow["R64-B8K"] > slow["R256-B8K"], "a larger reset value samples less"
    # PEBS costs (assists, pollution, interrupts) are charged to the application's core.
    for name in t:
        assert t[name]["observer_cpu_seconds"] > 0
