"""How tierlab's objects show themselves in a notebook: small HTML tables, a rich
rendering as HTML, frames in pandas or polars, and a sweep outcome's repr, HTML and table.
Imports nothing of tierlab at module level (results, recordings and sweep outcomes import it
in their methods)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def html_table(rows: Sequence[Sequence[Any]], header: Sequence[str] | None = None) -> str:
    """A small HTML table (cells escaped)."""
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def rendered_html(render: Any, width: int = 160) -> str:
    """What ``render(console)`` prints, as HTML (rich's own export: the terminal table)."""
    import io

    from rich.console import Console

    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=False)
    render(console)
    return console.export_html(inline_styles=True, code_format="<pre>{code}</pre>")


def to_library(df: pd.DataFrame, library: str) -> Any:
    """``df`` as a pandas or a polars frame."""
    if library == "pandas":
        return df
    if library == "polars":
        import polars as pl

        return pl.from_pandas(df)
    raise ValueError(f"library {library!r}: expected 'pandas' or 'polars'")


def sweep_frame(outcome: Any) -> pd.DataFrame:
    """A sweep's report as one table (a row per record; telemetry: per point and technique)."""
    import pandas as pd

    report = outcome.report
    table = getattr(report, "table", None)
    if callable(table):
        df = table()
        if isinstance(df, pd.DataFrame):
            return df
    doc = outcome.kind.to_json(report)
    if isinstance(doc, list):
        return pd.DataFrame([d for d in doc if isinstance(d, dict)])
    return pd.json_normalize(doc)


def sweep_repr(outcome: Any) -> str:
    run = outcome.run
    extra = ""
    if run.failures:
        extra += f", {len(run.failures)} failed"
    if run.interrupted:
        extra += ", interrupted"
    return (
        f"<{type(outcome).__name__} {outcome.plan.spec} ({outcome.kind.name}): "
        f"{len(outcome.plan.points)} points{extra}>"
    )


def sweep_html(outcome: Any) -> str:
    title = str(outcome.plan.spec)
    return rendered_html(lambda c: outcome.kind.render(outcome.report, c, title))
