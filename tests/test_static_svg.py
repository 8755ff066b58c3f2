"""The static SVG picture every report figure carries for viewers without scripts
(:mod:`tierlab.reporters.static_svg`): data, titles and ticks from the Plotly spec."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from io import BytesIO

import numpy as np

from tierlab.reporters import page as pg
from tierlab.reporters.static_svg import nice_ticks, render


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)  # well-formed XML
    return [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0, 10) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(0.013, 0.071, 5) == [0.02, 0.04, 0.06]
    assert nice_ticks(5, 5) == [5]


def test_heatmap_is_one_image_with_its_colours_titles_and_colour_bar() -> None:
    z = [[None, 0.0, 1.0], [2.0, None, 3.0]]
    spec = {
        "data": [
            {
                "type": "heatmap",
                "x": [0.5, 1.5, 2.5],
                "y": [0, 4],
                "z": z,
                "zmin": 0,
                "zmax": 3,
                "colorbar": {"title": {"text": "accesses (log)"}, "tickvals": [0, 1, 2, 3],
                             "ticktext": ["1", "10", "100", "1,000"]},
            }
        ],
        "layout": {
            "title": {"text": "heap: 1,111 accesses"},
            "xaxis": {"title": {"text": "time (ms)"}},
            "yaxis": {"title": {"text": "page in mapping"}},
        },
    }  # fmt: skip
    svg = render(spec)
    t = texts(svg)
    assert {"heap: 1,111 accesses", "time (ms)", "page in mapping", "accesses (log)"} <= set(t)
    assert {"1", "10", "100", "1,000"} <= set(t)
    uris = re.findall(r"href='data:image/png;base64,([^']+)'", svg)
    assert len(uris) == 2  # the cells and the colour bar
    from PIL import Image

    img = Image.open(BytesIO(base64.b64decode(uris[0]))).convert("RGB")
    assert img.size == (3, 2)
    px = np.asarray(img)
    # Row 0 of z is drawn at the bottom; gaps in the background's grey; the largest value
    # in Viridis' yellow, the smallest in its purple.
    assert tuple(px[1, 0]) == (0xF4, 0xF4, 0xF4)
    assert tuple(px[0, 2]) == (0xFD, 0xE7, 0x25)
    assert tuple(px[1, 1]) == (0x44, 0x01, 0x54)


def test_bars_lines_log_and_category_axes_and_a_legend() -> None:
    spec = {
        "data": [
            {"type": "bar", "name": "fifo", "x": ["bt", "cg", "lu"], "y": [3, 5, 8]},
            {"type": "bar", "name": "lru", "x": ["bt", "cg", "lu"], "y": [4, 2, 9]},
        ],
        "layout": {"barmode": "group", "yaxis": {"title": {"text": "page faults"}}},
    }
    svg = render(spec)
    t = texts(svg)
    assert {"bt", "cg", "lu", "fifo", "lru", "page faults"} <= set(t)
    assert svg.count("<rect") >= 6 + 1 + 2  # six bars, the plot area, two legend keys
    line = render(
        {
            "data": [{"type": "scatter", "mode": "lines+markers", "x": [1, 10, 100],
                      "y": [2.0, None, 8.0]}],
            "layout": {"xaxis": {"type": "log", "title": {"text": "R"}}},
        }
    )  # fmt: skip
    assert {"1", "10", "100", "R"} <= set(texts(line))
    assert line.count("<circle") == 2  # the gap is not drawn


def test_subplots_sit_in_their_domains_and_unknown_types_say_so() -> None:
    spec = {
        "data": [
            {"type": "scatter", "x": [0, 1], "y": [0, 1]},
            {"type": "scatter", "x": [0, 1], "y": [5, 6], "xaxis": "x2", "yaxis": "y2"},
        ],
        "layout": {
            "xaxis": {"domain": [0, 0.45]},
            "xaxis2": {"domain": [0.55, 1], "title": {"text": "second"}},
            "yaxis2": {"anchor": "x2", "title": {"text": "overhead (%)"}},
        },
    }
    svg = render(spec, width=800)
    assert {"second", "overhead (%)"} <= set(texts(svg))
    lines = re.findall(r"<polyline points='([^']+)'", svg)
    assert len(lines) == 2
    x_first = [float(p.split(",")[0]) for p in lines[0].split()]
    x_second = [float(p.split(",")[0]) for p in lines[1].split()]
    assert max(x_first) < min(x_second)
    note = render({"data": [{"type": "parcoords"}], "layout": {}})
    assert "a parcoords plot: shown when the page's scripts run" in " ".join(texts(note))


def test_every_figure_of_a_page_carries_its_picture() -> None:
    page = pg.Page("t")
    page.section("s").add(
        pg.Figure({"data": [{"type": "bar", "x": [1, 2], "y": [float("nan"), 3.0]}]}),
        pg.Figure({"data": [{"type": "scatter", "x": [1, 2], "y": [1, 2]}]}, height=300),
    )
    html = page.render()
    assert html.count("class='static-figure'") == 2
    assert "height='300'" in html
    # The NaN became null in the figure's data (JSON has no NaN).
    assert '"y":[null,3.0]' in html
