"""Shared fixtures: the CLI runner, the shared data directory, small scenario files."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import signal
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# A shell starts background jobs (`make test &`, some CI runners) with SIGINT ignored, and an
# ignored signal stays ignored in every program they start: the Ctrl-C tests' tierlab would
# then never see the interrupt they send (Python installs its KeyboardInterrupt handler only
# when SIGINT is at its default). Catching it here gives the programs the tests start the
# default disposition back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: A short run of the built-in demo scenario (a few simulated milliseconds).
SHORT = ["--set", 'duration="20ms"', "--set", 'window="5ms"']


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> object:
        return json.loads(self.stdout)


def tierlab(
    *args: str | os.PathLike[str],
    cwd: Path | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> Completed:
    """Run ``python -m tierlab ARGS`` and capture its output (``env``: variables added to the
    environment, which has no ``COLUMNS`` otherwise)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tierlab", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"} | (env or {}),
    )
    return Completed(proc.returncode, proc.stdout, proc.stderr)


#: Warnings a `python -m tierlab` process does not show (Python's default filters).
_HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def cli(*args: str | os.PathLike[str]) -> Completed:
    """Run ``tierlab ARGS`` in this process: ``tierlab.cli.main.main``, what ``python -m
    tierlab`` runs, with its stdout, stderr (warnings included, as a process shows them) and
    exit code captured. For the error paths of commands that also have subprocess tests: the
    same message and exit code, without a process's start-up (0.2-0.6 s each)."""
    from tierlab.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse's errors and --help
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
    for w in caught:
        if not issubclass(w.category, _HIDDEN_WARNINGS):
            err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    return Completed(code, out.getvalue(), err.getvalue())


class Watched:
    """``python -m tierlab ARGS`` with its stderr on a pseudo-terminal, so that it shows its
    progress as a person sees it; a thread reads everything it writes there. Tests wait on
    what it shows (:meth:`wait_for`), or on files it writes, never for a time."""

    def __init__(self, *args: str | os.PathLike[str], cwd: Path | None = None) -> None:
        import pty
        import threading

        master, slave = pty.openpty()
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        env.update(COLUMNS="200", TERM="xterm")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tierlab", *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
            cwd=cwd,
            env=env,
        )
        os.close(slave)
        self._master = master
        self._buf = bytearray()
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                chunk = b""
            with self._cond:
                if not chunk:
                    self._buf += b"\0"  # the end, for wait_for
                    self._cond.notify_all()
                    return
                self._buf += chunk
                self._cond.notify_all()

    def stderr(self) -> str:
        """What the process wrote on its terminal so far, without colours and cursor codes."""
        import re

        with self._cond:
            text = self._buf.decode("utf-8", "replace")
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\0", "", text)

    def wait_for(self, cond: Any, what: str, timeout: float = 180) -> None:
        """Wait until ``cond()`` holds (checked whenever the process writes, and every
        0.1 s for conditions on files); fail when the process ends or ``timeout`` passes."""
        import time

        end = time.monotonic() + timeout
        with self._cond:
            while not cond():
                if self.proc.poll() is not None:
                    raise AssertionError(f"tierlab ended before {what}: {self.stderr()}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}: {self.stderr()}")
                self._cond.wait(min(left, 0.1))

    def wait_for_text(self, pattern: str, timeout: float = 180) -> None:
        import re

        self.wait_for(lambda: re.search(pattern, self.stderr()) is not None, pattern, timeout)

    def finish(self, sig: int | None = None, timeout: float = 120) -> Completed:
        """Send ``sig`` (if given), wait for the process; its exit status, stdout, stderr."""
        if sig is not None:
            self.proc.send_signal(sig)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(timeout)
            os.close(self._master)
        return Completed(self.proc.returncode, out.decode("utf-8", "replace"), self.stderr())


#: A command's start and progress lines on stderr (``tierlab run: demo: 1 run, ...``,
#: ``tierlab import: starting ...``): the command's name before the colon; an error line is
#: ``tierlab: error: ...``.
PROGRESS_LINE = re.compile(r"^tierlab [a-z][a-z-]*( [a-z][a-z-]*)?: ")


def without_progress(stderr: str) -> str:
    """``stderr`` without the start and progress lines a command prints before it fails."""
    return "\n".join(x for x in stderr.splitlines() if not PROGRESS_LINE.match(x))


def assert_user_error(res: Completed, code: int = 2) -> str:
    """The run failed with a one-line `tierlab: error:` message and no traceback; that
    message (what stderr holds besides the command's start and progress lines)."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    assert "tierlab: error:" in res.stderr, res.stderr
    return without_progress(res.stderr)


#: The longest test files first (worker-seconds of one run, largest first; measured with
#: `pytest -n 2 --durations=0 --junitxml`, 2026-12-08): pytest-xdist hands out whole files
#: (`--dist loadfile`) in collection order when `--no-loadscope-reorder` is given (the Makefile
#: gives it; by default xdist orders files by their number of tests instead), so a long file
#: collected last would leave the other worker idle at the end. test_lab boots a QEMU guest
#: for ~3 minutes of one worker: first. test_reproduce makes the smoke report that
#: test_sweep_ray and test_browser then find made (whichever worker asks first makes it).
#: Files not listed follow, in name order.
LONGEST_FIRST = (
    "test_lab",
    "test_sweep_ray",
    "test_record",
    "test_sweep_slurm",
    "test_policies",
    "test_reproduce",
    "test_provenance",
    "test_real_traces",
    "test_placement_sim",
    "test_hostile",
    "test_python_agents",
    "test_tiering_sim",
    "test_browser",
    "test_cli",
    "test_cli_options_robust",
    "test_place",
    "test_survival",
    "test_import",
    "test_export_trace",
    "test_telemetry_cli",
    "test_view",
    "test_fuzz",
    "test_sweep",
    "test_trace_import",
    "test_trace_sync",
    "test_ux",
    "test_readme_tour",
    "test_engine_inputs",
    "test_sim_pebs",
    "test_trace",
    "test_tune",
    "test_replay_commands",
    "test_pebs_scale",
    "test_tier",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # A stable sort: each file's tests keep their order and stay together.
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"the shared directory is absent (expected at {SHARED.name}/ beside the repo)")
    return SHARED


@pytest.fixture(scope="session")
def rand_masim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A masim config with random accesses (so the seed matters), 20 ms long."""
    path = tmp_path_factory.mktemp("masim") / "rand.cfg"
    path.write_text(
        "#regions\n"
        "a, 8388608\n"
        "b, 4194304\n"
        "\n"
        "#phases\n"
        "hot b\n"
        "10\n"
        "a, 1, 64, 1\n"
        "b, 1, 64, 4, rw\n"
        "\n"
        "hot a\n"
        "10\n"
        "a, 1, 64, 4, ro\n"
        "b, 0, 4096, 1\n"
    )
    return path


@pytest.fixture(scope="session")
def demo_toml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo scenario exported to a file, shortened to 20 ms."""
    res = tierlab("export", "demo", *SHORT)
    assert res.returncode == 0, res.stderr
    path = tmp_path_factory.mktemp("scenario") / "demo.toml"
    path.write_text(res.stdout)
    return path


@pytest.fixture(scope="session")
def smoke_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tierlab reproduce all --profile smoke``: every paper's figures at a size CI affords
    (the quick profile takes minutes; its points are checked by test_quick_points_valid).
    Made once per test run: under pytest-xdist the workers share it (the first makes it
    while holding a lock; the tests only read it)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's directory, shared by every worker
    out = root / "reproduce-smoke" / "all"
    with open(root / "reproduce-smoke.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "report.json").is_file():
            res = tierlab("reproduce", "all", "--profile", "smoke", "--out", out, timeout=600)
            assert res.returncode == 0, res.stderr
            assert f"open {out / 'index.html'}" in res.stdout
    return out
