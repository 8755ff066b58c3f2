"""Regenerate every image and sample output of the README and the docs pages (``make docs``).

Two kinds of generated content:

* **Sample outputs**: a fenced block right after a marker line
  ``<!-- make-docs output: tierlab ARGS -->`` in ``README.md`` or ``docs/*.md`` holds what
  that command prints. Its lines that vary from run to run (``wall time``, elapsed times,
  process ids: :data:`VOLATILE`) keep the text they have in the page; every other line is
  replaced by the command's output. ``tests/test_readme_tour.py`` compares the numbers of
  these blocks with the tool's output, so a block that drifts fails CI.
* **Images** (:data:`IMAGES`): each ``docs/img/NAME.png`` with the commands that draw it and
  the file they write. A command shared by several images (``tierlab telemetry pebs-minife``
  draws three) runs once.

Everything runs in a scratch directory with the repository's ``examples/``, ``tests/`` and
``docs/`` linked in (the layout of a fresh clone), with the ``tierlab`` of this checkout's
``.venv``. The full regeneration runs every figure's full-size sweep (about 1 h 30 min of CPU
on the reference 2-core machine: ``tierlab scenarios`` lists each one's cost), so it can be
limited:

    .venv/bin/python tools/make_docs.py                 # everything
    .venv/bin/python tools/make_docs.py demo pebs-*     # images / outputs whose name matches
    .venv/bin/python tools/make_docs.py --list          # what it would regenerate, and how
    .venv/bin/python tools/make_docs.py --outputs       # only the sample outputs (seconds)

``docs/parameters.md`` (``tierlab params --markdown``) is regenerated too (name
``parameters``).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"

#: A marker before a sample-output block: the command whose output the block holds.
MARKER = re.compile(r"^<!-- make-docs output: (tierlab .+?) -->\s*$")

#: Lines of a sample output that vary between runs of the same command on the same inputs:
#: they keep their text in the page and are not compared.
VOLATILE = re.compile(r"wall time|elapsed|\bpid \d+|finished: .* in \d")


@dataclass(frozen=True)
class Image:
    """``docs/img/{name}.png``: drawn by ``commands`` (run in order, in the scratch
    directory), copied from ``source`` (a path relative to it; a glob picks the one file)."""

    name: str
    commands: tuple[str, ...]
    source: str


PEBS_FIGS = (
    "tierlab telemetry pebs-minife --techniques R64-B8K,R128-B8K,R256-B8K --no-baseline "
    "--set workload.iterations=60 --out pm60",
    "python -m tierlab.pebs_figs pm60",
)

IMAGES: tuple[Image, ...] = (
    Image("demo-heatmap", ("tierlab run demo --out demo-out",), "demo-out/heatmap.png"),
    Image("tiering-kv", ("tierlab run tiering-kv --jobs 2 --out kv",), "kv/tiering.png"),
    Image("cmcp-table1", ("tierlab run cmcp-table1 --jobs 2 --out t1",), "t1/table1.png"),
    Image("cmcp-scaling", ("tierlab run cmcp-scaling --jobs 2 --out cs",), "cs/scaling.png"),
    Image("cmcp-p", ("tierlab run cmcp-p --jobs 2 --out cp",), "cp/p.png"),
    Image("cmcp-pagesize", ("tierlab run cmcp-pagesize --jobs 2 --out cps",), "cps/pagesize.png"),
    Image("cmcp-coremap", ("tierlab coremap cmcp-table1 --out cm",), "cm/coremap.png"),
    Image(
        "telescope-5tb",
        ("tierlab telemetry telescope-5tb --jobs 2 --out tele",),
        "tele/precision_recall.png",
    ),
    Image(
        "telescope-footprints",
        ("tierlab telemetry telescope-footprints --jobs 2 --out tf",),
        "tf/precision_recall.png",
    ),
    Image(
        "pebs-minife-heatmap",
        (
            "tierlab telemetry pebs-minife --jobs 2 --out pm",
            "tierlab view pm/samples-R64-B8K -o pm-view --images",
        ),
        "pm-view/mapping-2-heatmap.png",
    ),
    Image(
        "pebs-lulesh-heatmap-R64",
        (
            "tierlab telemetry pebs-lulesh --jobs 2 --out pl",
            "tierlab view pl/samples-R64-B8K -o pl-view64 --images",
        ),
        "pl-view64/mapping-22-heatmap.png",
    ),
    Image(
        "pebs-lulesh-heatmap-R128",
        (
            "tierlab telemetry pebs-lulesh --jobs 2 --out pl",
            "tierlab view pl/samples-R128-B8K -o pl-view128 --images",
        ),
        "pl-view128/mapping-22-heatmap.png",
    ),
    Image(
        "pebs-lulesh-heatmap-R256",
        (
            "tierlab telemetry pebs-lulesh --jobs 2 --out pl",
            "tierlab view pl/samples-R256-B8K -o pl-view256 --images",
        ),
        "pl-view256/mapping-22-heatmap.png",
    ),
    Image("pebs-minife-fig6", PEBS_FIGS, "pm60/pebs-fig6.png"),
    Image("pebs-minife-fig7", PEBS_FIGS, "pm60/pebs-fig7.png"),
    Image("pebs-scale", ("tierlab telemetry pebs-scale --out ps",), "ps/pebs-scale.png"),
    Image(
        "reproduce-report",
        ("tierlab reproduce all --quick --jobs 2 --out repro", "screenshot repro/index.html"),
        "repro/index.png",
    ),
)


@dataclass
class Output:
    """A sample-output block: ``page`` lines ``first``..``end`` (exclusive) are the block's
    text, between its fences, printed by ``command``."""

    page: Path
    command: str
    first: int
    end: int

    @property
    def name(self) -> str:
        return f"{self.page.stem}: {self.command}"


def find_outputs(pages: list[Path] | None = None) -> list[Output]:
    """Every marked sample-output block of the README and the docs pages."""
    found = []
    for page in pages or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            m = MARKER.match(line)
            if not m:
                continue
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"{page}:{i + 1}: a make-docs marker not followed by a block")
            end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
            if end is None:
                raise SystemExit(f"{page}:{i + 2}: the block after the marker never closes")
            found.append(Output(page, m.group(1), i + 2, end))
    return found


def merge(old: list[str], new: list[str]) -> list[str]:
    """The block's new text: the command's output, with each volatile line (of the same
    kind, in order) keeping the page's text."""
    kept = [x for x in old if VOLATILE.search(x)]
    out = []
    for line in new:
        if VOLATILE.search(line) and kept:
            out.append(kept.pop(0))
        else:
            out.append(line.rstrip())
    return out


def scratch() -> Path:
    """A directory laid out as a fresh clone sees it from its root."""
    d = Path(tempfile.mkdtemp(prefix="tierlab-docs-"))
    for name in ("examples", "tests", "docs"):
        (d / name).symlink_to(ROOT / name)
    return d


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    e["COLUMNS"] = "100"
    e.setdefault("TIERLAB_PROGRESS_INTERVAL", "60")
    return e


def run(command: str, cwd: Path) -> str:
    """Run a command as a shell would (the ``tierlab`` of this checkout); its stdout and
    stderr, in order. A failure stops ``make docs`` with the command's error."""
    if command.startswith("screenshot "):
        screenshot(cwd / command.split(" ", 1)[1])
        return ""
    print(f"make docs: {command}", file=sys.stderr, flush=True)
    p = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env(), capture_output=True, text=True, check=False
    )
    if p.returncode != 0:
        raise SystemExit(f"make docs: {command!r} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p.stdout


def screenshot(page: Path) -> None:
    """``page`` (an HTML report) as Chromium draws it at 1300 x 900, into ``page``.png."""
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("TIERLAB_CHROMIUM") or shutil.which("chromium") or ""
    if not chromium:
        raise SystemExit("make docs: the report's screenshot needs Chromium (Debian: chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1300, "height": 900})
        tab.goto(page.resolve().as_uri())
        tab.wait_for_load_state("networkidle")
        tab.screenshot(path=str(page.with_suffix(".png")))
        browser.close()


def refresh_outputs(outputs: list[Output], cwd: Path) -> None:
    # Rewrite each page from its last block up, so the earlier blocks' line numbers hold.
    for out in sorted(outputs, key=lambda o: (str(o.page), -o.first)):
        lines = out.page.read_text().splitlines()
        new = merge(lines[out.first : out.end], run(out.command, cwd).splitlines())
        lines[out.first : out.end] = new
        out.page.write_text("\n".join(lines) + "\n")
        print(f"make docs: {out.page.relative_to(ROOT)}: {out.command}", file=sys.stderr)


def refresh_images(images: list[Image], cwd: Path) -> None:
    done: set[str] = set()
    for img in images:
        for command in img.commands:
            if command not in done:
                run(command, cwd)
                done.add(command)
        matches = sorted(cwd.glob(img.source))
        if len(matches) != 1:
            raise SystemExit(f"make docs: {img.name}: {img.source} matched {len(matches)} files")
        shutil.copyfile(matches[0], ROOT / "docs" / "img" / f"{img.name}.png")
        print(f"make docs: docs/img/{img.name}.png", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="globs of image or output names (default: all)")
    ap.add_argument("--list", action="store_true", help="list what would be regenerated")
    ap.add_argument("--outputs", action="store_true", help="only the sample outputs")
    args = ap.parse_args(argv)

    def chosen(name: str) -> bool:
        return not args.names or any(fnmatch.fnmatchcase(name, g) for g in args.names)

    outputs = [o for o in find_outputs() if chosen(o.name) or chosen(o.page.stem)]
    images = [] if args.outputs else [i for i in IMAGES if chosen(i.name)]
    params = not args.outputs and chosen("parameters")
    if args.list:
        for o in outputs:
            print(f"output  {o.page.relative_to(ROOT)}:{o.first}  {o.command}")
        for i in images:
            print(f"image   docs/img/{i.name}.png  {' && '.join(i.commands)}  ({i.source})")
        if params:
            print("page    docs/parameters.md  tierlab params --markdown")
        return 0
    cwd = scratch()
    try:
        refresh_outputs(outputs, cwd)
        refresh_images(images, cwd)
        if params:
            (ROOT / "docs" / "parameters.md").write_text(run("tierlab params --markdown", cwd))
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
