"""The interactive reports in a real headless browser (Debian's Chromium driven by
Playwright): each page loads offline with no console error and no request leaving the
file, every figure is drawn with data, the reproduction has its claims table.

Needs the `chromium` Debian package (`make install` installs it as root) and the Python
`playwright` package (the test extra); the browser Playwright would download is not used.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import tierlab

CHROMIUM = (
    os.environ.get("TIERLAB_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
    or ""
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM or not Path(CHROMIUM).exists():
        pytest.skip("no Chromium on PATH (Debian package chromium: make install installs it)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": 1300, "height": 900},
        )
        yield ctx
        ctx.close()


def load(browser: Any, page_file: Path) -> tuple[Any, list[str], list[str]]:
    """Open ``page_file``; wait until every figure is drawn. Returns the page, the console
    errors and the URLs requested other than the file itself."""
    page = browser.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    url = page_file.resolve().as_uri()
    page.goto(url)
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.figure-plot'))"
        ".every(d => d.dataset.rendered === '1' || d.querySelector('.figure-error'))",
        timeout=90_000,
    )
    return page, errors, [u for u in requests if u != url]


def figures_drawn(page: Any) -> list[int]:
    """Traces per figure (Plotly keeps them on the element as `data`), -1 if not drawn."""
    return page.evaluate(
        "Array.from(document.querySelectorAll('.figure-plot')).map(d => "
        "d.dataset.rendered === '1' && d.data ? d.data.length : -1)"
    )


def test_reproduce_report_in_browser(browser: Any, smoke_report: Path) -> None:
    page, errors, requests = load(browser, smoke_report / "index.html")
    assert errors == []
    assert requests == []
    drawn = figures_drawn(page)
    assert len(drawn) >= 8 and all(n > 0 for n in drawn), drawn
    # Plotly drew SVG for each (a plot, not an error message).
    assert page.locator(".figure-plot .main-svg").count() >= len(drawn)
    assert page.locator(".figure-error").count() == 0
    claims = page.locator("table.claims tbody tr")
    assert claims.count() >= 30
    assert page.locator("table.claims td.verdict").first.inner_text() in (
        "holds",
        "does not hold",
        "n/a (not run)",
    )
    # The contents list links to every paper and the banner says how it was run.
    links = page.locator("nav.contents a").all_inner_texts()
    assert "Summary" in links and any("CMCP" in x for x in links)
    assert "Smoke run" in page.locator(".banner").inner_text()
    page.close()


def test_view_page_in_browser(browser: Any, tmp_path: Path) -> None:
    import numpy as np

    from tierlab.recording import RecordingWriter

    rec = tmp_path / "rec"
    base, page_size = 0x7F00_0000_0000, 4096
    with RecordingWriter(rec, source="browser test") as w:
        w.append_mappings(
            time_ns=[0, 0],
            event=["map", "map"],
            start=[base, base + (1 << 30)],
            length=[256 * page_size, 64 * page_size],
            name=["heap", "[anon]"],
        )
        n = 5000
        rng = np.random.default_rng(1)
        pages = rng.integers(0, 256, n)
        addr = np.where(pages < 200, base + pages * page_size, base + (1 << 30) + pages * 64)
        w.append_samples(
            {
                "time_ns": np.arange(n, dtype=np.uint64) * 1000,
                "tid": np.ones(n, dtype=np.uint32),
                "cpu": np.zeros(n, dtype=np.uint32),
                "addr": addr.astype(np.uint64),
                "ip": np.zeros(n, dtype=np.uint64),
                "weight": np.zeros(n, dtype=np.uint64),
                "data_src": np.zeros(n, dtype=np.uint64),
                "event": ["pebs-model"] * n,
                "drain": (np.arange(n) // 100).astype(np.uint64),
            }
        )
    out = tmp_path / "view"
    res = tierlab("view", rec, "-o", out)
    assert res.returncode == 0, res.stderr
    page, errors, requests = load(browser, out / "index.html")
    assert errors == [] and requests == []
    drawn = figures_drawn(page)
    assert len(drawn) == 6 and all(n > 0 for n in drawn), drawn
    text = page.locator("section#overview").inner_text()
    # Units and separators, not raw values.
    assert "5,000" in text and "1.0 MiB" in text and "recording complete" in text
    assert "complete: True" not in text
    page.close()


def test_tune_page_in_browser(browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "tune"
    res = tierlab(
        "tune",
        "tiering-kv",
        "--points",
        "HeMem",
        "--param",
        "tiering.read_hot_threshold=4:8:4",
        "--param",
        'tiering.interval=["10ms","50ms"]',
        "--objective",
        "workload.kv.throughput",
        "--set",
        'duration="1s"',
        "--set",
        "workload.keys=10000000",
        "--out",
        out,
    )
    assert res.returncode == 0, res.stderr
    page, errors, requests = load(browser, out / "index.html")
    assert errors == [] and requests == []
    drawn = figures_drawn(page)
    assert len(drawn) == 3 and all(n > 0 for n in drawn), drawn
    page.close()


def test_view_of_a_full_trace_reads_without_scripts(browser: Any, tmp_path: Path) -> None:
    """A viewer without scripts (a screenshot at load, a mail client) sees every plot as a
    static picture with its titles; nothing is cut off; the time axis says accesses when the
    trace counts time in accesses. With scripts, the interactive figures say the same."""
    import re

    import numpy as np

    from tierlab.recording import RecordingWriter

    rec = tmp_path / "rec"
    base, page_size = 0x7F00_0000_0000, 4096
    with RecordingWriter(rec, source="browser test") as w:
        w.append_mappings(
            time_ns=[0], event=["map"], start=[base], length=[512 * page_size], name=["heap"]
        )
        n = 20_000
        rng = np.random.default_rng(3)
        pages = np.minimum(rng.zipf(1.3, n) - 1, 511)
        w.append_accesses(
            {
                "time_ns": np.arange(n, dtype=np.uint64),
                "tid": np.ones(n, dtype=np.uint32),
                "addr": (base + pages * page_size).astype(np.uint64),
                "kind": (np.arange(n) % 3 == 0).astype(np.uint8),
            }
        )
        w.update_meta(time_unit="accesses")  # as the tracer's recordings say
    out = tmp_path / "view"
    res = tierlab("view", rec, "-o", out)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "view.json"]
    html = (out / "index.html").read_text()
    # The same page with its scripts removed: what a viewer without scripts shows.
    static = tmp_path / "static.html"
    static.write_text(re.sub(r"<script>.*?</script>", "", html, flags=re.S))
    page = browser.new_page()
    page.goto(static.resolve().as_uri())
    figs = page.locator(".figure-plot")
    assert figs.count() == 3  # pages touched, the mapping's heatmap and histogram
    for i in range(figs.count()):
        fig = figs.nth(i)
        svg = fig.locator("svg.static-figure")
        assert svg.count() == 1, i
        box = svg.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 200, (i, box)
        # Every label lies inside the picture (nothing cut off).
        for t in svg.locator("text").all():
            tb = t.bounding_box()
            assert tb is not None
            assert box["x"] - 1 <= tb["x"] and tb["x"] + tb["width"] <= box["x"] + box["width"] + 1
            assert (
                box["y"] - 1 <= tb["y"] and tb["y"] + tb["height"] <= box["y"] + box["height"] + 1
            )
        # Drawn, not blank: the screenshot of the figure has many colours.
        png = svg.screenshot()
        from io import BytesIO

        from PIL import Image

        colours = Image.open(BytesIO(png)).convert("RGB").getcolors(1 << 20)
        assert colours is not None and len(colours) > 8, (i, len(colours or []))
    labels = page.locator("svg.static-figure text").all_text_contents()
    assert "accesses of the thread (millions)" in labels
    assert any("log-spaced bins" in t for t in labels) or "accesses per page (N)" in labels
    assert not any("time (ms)" in t for t in labels)
    page.close()
    # With scripts: the interactive figures replace the pictures, with the same axis title.
    page, errors, requests = load(browser, out / "index.html")
    assert errors == [] and requests == []
    assert page.locator("svg.static-figure").count() == 0
    assert "accesses of the thread (millions)" in page.locator(".xtitle").all_text_contents()
    page.close()
