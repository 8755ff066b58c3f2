"""``tierlab reproduce``: run every figure and table of a source paper that tierlab
reproduces, through the sweep engine, and write one interactive report with the paper's
values beside tierlab's, a table of the paper's claims with verdicts computed from the
results, and the provenance of every parameter.

What a paper reproduces is **data**: one TOML file per paper in ``papers/`` (its figures:
scenario, how it is run and plotted, the smaller runs of ``--quick``; the paper's numbers
with their source; its claims, each with a predicate over the results; the scenarios'
parameters, each *sourced* or *calibrated* or *assumed*), validated on load
(:mod:`tierlab.reproduce.spec`). Adding a paper is one file and one line in
:data:`PAPERS`; adding a figure, claim or parameter to a paper is an edit of its file
(a new kind of plot is one function in :mod:`tierlab.reproduce.views`, a new kind of
predicate one in :mod:`tierlab.reproduce.checks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tierlab.reproduce.model import Paper

#: Paper name -> its data file in ``tierlab/reproduce/papers/``, in report order.
PAPERS: dict[str, str] = {
    "pebs": "pebs.toml",
    "cmcp": "cmcp.toml",
    "telescope": "telescope.toml",
    "numa": "numa.toml",
    "tiering": "tiering.toml",
}


def names() -> list[str]:
    """The papers, in report order."""
    return list(PAPERS)


def load(name: str) -> Paper:
    """The validated definition of paper ``name`` (KeyError for an unknown name)."""
    from importlib.resources import files

    from tierlab.reproduce.spec import load_paper

    resource = files("tierlab.reproduce").joinpath("papers", PAPERS[name])
    return load_paper(
        resource.read_text(encoding="utf-8"), f"tierlab/reproduce/papers/{PAPERS[name]}"
    )


__all__ = ["PAPERS", "load", "names"]
