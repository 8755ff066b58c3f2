"""Issue 18, engine side: hostile scenario numbers, files that are not what they claim to be,
runs that would not fit in memory and simulated out-of-memory, through the CLI as a user
meets them. Each ends in one clear line and a non-zero exit (or the correct result), never a
traceback, a hang or a wrapped-around number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import without_progress


def tierlab(
    *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tierlab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def one_clear_line(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode != 0, p.stdout
    err = without_progress(p.stderr).strip()  # (the command's start line comes first)
    assert "Traceback" not in err and "panicked" not in err and "RUST_BACKTRACE" not in err, err
    assert len(err.splitlines()) == 1, p.stderr
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("machine.cost.fault_ns=1e17", "machine.cost.fault_ns"),
        ("machine.tlb.l2_entries=1200000000", "machine.tlb.l2_entries"),
        ("machine.tlb.l1_4k_entries=100000000", "machine.tlb.l1_4k_entries"),
        ("machine.nodes[0].latency_ns=1e17", "latency_ns"),
        ("machine.cost.walk_ns_per_level=nan", "machine.cost.walk_ns_per_level"),
    ],
)
def test_numbers_out_of_range_are_refused_with_their_field(override: str, field: str) -> None:
    p = tierlab("run", "demo", "--set", 'duration="0.2s"', "--set", override, "--json")
    one_clear_line(p, field, "demo")


def test_latency_of_1e17_on_both_nodes_is_refused() -> None:
    p = tierlab(
        "run",
        "demo",
        "--set",
        'duration="0.2s"',
        "--set",
        "machine.nodes[0].latency_ns=1e17",
        "--set",
        "machine.nodes[1].latency_ns=1e17",
        "--json",
    )
    one_clear_line(p, "machine.nodes[0].latency_ns", "1e17 is out of range")


@pytest.mark.parametrize("level", ["l1_4k", "l1_2m", "l2"])
def test_huge_tlbs_are_refused_or_run_in_bounded_time(level: str) -> None:
    """A 65,536-entry fully associative TLB compared all its ways on every lookup (a run of
    the demo took minutes); ways are bounded, and the largest TLB allowed runs in seconds."""
    huge = [f"machine.tlb.{level}_entries=65536", f"machine.tlb.{level}_ways=65536"]
    p = tierlab("run", "demo", "--set", huge[0], "--set", huge[1], "--json", timeout=60)
    one_clear_line(p, f"machine.tlb.{level}_ways", "must be in [1, 256]")
    largest = [f"machine.tlb.{level}_entries=65536", f"machine.tlb.{level}_ways=256"]
    short = ["--set", 'duration="0.2s"']
    p = tierlab("run", "demo", *short, "--set", largest[0], "--set", largest[1], "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["machine"]["accesses"] > 0


def test_a_one_ns_window_is_refused_with_the_estimate() -> None:
    p = tierlab("run", "demo", "--set", 'window="1ns"', "--json")
    err = one_clear_line(p, "window", "would need about", "GiB", "available")
    assert "windows of 1ns" in err


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_special_files_are_refused_without_a_hang(tmp_path: Path, target: str) -> None:
    if target == "fifo":
        path = tmp_path / "masim.cfg"
        os.mkfifo(path)
        target = str(path)
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[workload]\nkind = "masim"\nconfig = "{target}"\n')
    one_clear_line(tierlab("run", str(scenario), timeout=60), "not a regular file")
    one_clear_line(tierlab("run", f"masim:{target}", timeout=60), "not a regular file")
    one_clear_line(tierlab("run", target, timeout=60), "not a regular file")


def test_a_file_that_is_not_a_masim_config_is_not_echoed(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text(
        "root:$6$saltsalt$supersecrethash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
    )
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[workload]\nkind = "masim"\nconfig = "{secret}"\n')
    for p in (tierlab("run", str(scenario)), tierlab("run", f"masim:{secret}")):
        err = one_clear_line(p, "not a masim config")
        assert "supersecret" not in err and "saltsalt" not in err and "daemon" not in err, err


def test_etc_shadow_as_a_masim_config_is_not_echoed(tmp_path: Path) -> None:
    """The issue's literal input: `config = "/etc/shadow"` (readable when the tests run as
    root, else refused as unreadable): one line, and nothing of the file in it."""
    scenario = tmp_path / "s.toml"
    scenario.write_text('[workload]\nkind = "masim"\nconfig = "/etc/shadow"\n')
    err = one_clear_line(tierlab("run", str(scenario)), "/etc/shadow")
    try:
        lines = Path("/etc/shadow").read_text().splitlines()
    except OSError:
        assert "cannot read" in err, err
        return
    assert "not a masim config" in err, err
    for line in lines:
        fields = line.split(":")
        assert line not in err
        assert len(fields) < 2 or len(fields[1]) < 4 or fields[1] not in err


def test_a_missing_init_data_file_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.cfg"
    cfg.write_text("a, 4096, data.bin\n\np\n10\na, 0, 64, 1\n")
    one_clear_line(tierlab("run", f"masim:{cfg}"), "c.cfg:1", "initial-data file `data.bin`")
    (tmp_path / "data.bin").write_bytes(b"\0" * 64)
    p = tierlab("run", f"masim:{cfg}", "--json")
    assert p.returncode == 0, p.stderr


def test_out_of_memory_keeps_what_was_simulated(tmp_path: Path) -> None:
    scenario = tmp_path / "oom.toml"
    scenario.write_text(
        'duration = "2s"\nwindow = "10ms"\n[machine]\ncores = 1\n'
        '[[machine.nodes]]\nname = "only"\ncapacity = "16MiB"\nlatency_ns = 90.0\n'
        '[workload]\nkind = "uniform"\nfootprint = "64MiB"\n'
    )
    out = tmp_path / "out"
    p = tierlab("run", str(scenario), "--out", str(out))
    err = one_clear_line(p, "simulation error", "out of memory", "kept what was simulated")
    assert p.returncode == 1, err
    run = json.loads((out / "run.json").read_text())
    assert run["interrupted"] is False
    assert "out of memory" in run["error"]
    assert 0 < run["sim_seconds_done"] < 2
    stats = json.loads((out / "stats.json").read_text())
    assert stats["machine"]["page_faults"] == 4096
    assert (out / "timeseries.parquet").exists()


def test_out_of_memory_through_the_api(tmp_path: Path) -> None:
    import tierlab

    scenario = tmp_path / "oom.toml"
    scenario.write_text(
        '[machine]\ncores = 1\n[[machine.nodes]]\nname = "only"\ncapacity = "8MiB"\n'
        "latency_ns = 90.0\n"
        '[workload]\nkind = "zipf"\nfootprint = "64MiB"\n'
    )
    r = tierlab.run(scenario, set=['duration="1s"'])
    assert r.error is not None and "out of memory" in r.error
    assert not r.interrupted
    assert r.stats["machine"]["accesses"] > 0
