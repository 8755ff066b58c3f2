"""tierlab in a notebook: the sweep commands as functions of the top-level API
(``tierlab.sweep``, ``tierlab.telemetry``, ``tierlab.reproduce``, ``tierlab.tune``), and how
results show themselves (a short ``repr``, an HTML table in Jupyter).

    >>> import tierlab
    >>> s = tierlab.sweep("cmcp-replay")               # any scenario with sweep points
    >>> s                                               # its table, in a notebook
    >>> s.frame()                                       # pandas; s.frame("polars")
    >>> c = tierlab.telemetry("telescope-footprints", quick=True, jobs=2)
    >>> t = tierlab.tune("tiering-kv", {"tiering.read_hot_threshold": "2:8:2"},
    ...                  "workload.kv.throughput", point="HeMem", set=['duration="3s"'])
    >>> p = tierlab.reproduce("numa", quick=True, out="repro")   # the claims, with verdicts

``tierlab.sweep`` and the others are also the names of tierlab's modules: the modules are
callable (``tierlab.sweep(...)`` calls :func:`sweep` here; ``tierlab.sweep.api`` is still the
module's).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tierlab.reproduce.runner import PaperRun
    from tierlab.sweep.api import SweepOutcome
    from tierlab.sweep.executor import Executor
    from tierlab.tune import Search


# ---------------------------------------------------------------------------------------
# Showing results


from tierlab.display import html_table, to_library

# ---------------------------------------------------------------------------------------
# The sweep commands as functions


def _executor(jobs: int, executor: Executor | None) -> Executor:
    from tierlab.sweep.executor import LocalExecutor

    return executor if executor is not None else LocalExecutor(jobs)


def _quick(scenario: str, command: str, set: Iterable[str] | None) -> tuple[list[str], Any]:
    from tierlab import costs

    user = list(set or [])
    q = costs.quick(scenario, command, user)
    return [*q.set, *user], (q.keeps if q.points else None)


def sweep(
    scenario: str | Path,
    kind: str | None = None,
    *,
    quick: bool = False,
    set: Iterable[str] | None = None,
    seed: int | None = None,
    only: str | None = None,
    jobs: int = 2,
    executor: Executor | None = None,
    out: str | Path | None = None,
    **options: Any,
) -> SweepOutcome[Any]:
    """Run a scenario's sweep points (as ``tierlab run SCENARIO``): the outcome shows its
    table in a notebook, ``.frame()`` gives it as a pandas (or ``.frame("polars")``) frame.
    ``quick`` runs the scaled-down form of ``--quick``; ``out`` keeps every point in
    ``OUT/points/`` (reused by the next call)."""
    from tierlab.sweep import api, kinds
    from tierlab.sweep.point import scenario_points

    user, keep = _quick(str(scenario), "run", set) if quick else (list(set or []), None)
    if kind is None:
        name, _ = scenario_points(str(scenario), user)
        k = kinds.for_sweep(name)
    else:
        k = kinds.get(kind, **options)
    with _executor(jobs, executor) as ex:
        return api.run_kind(
            scenario,
            k,
            seed=seed,
            set=user,
            only=only,
            executor=ex,
            cache_dir=Path(out) / "points" if out is not None else None,
            keep=keep,
        )


def telemetry(
    scenario: str | Path,
    techniques: Sequence[str] | None = None,
    *,
    baseline: bool = True,
    quick: bool = False,
    set: Iterable[str] | None = None,
    seed: int | None = None,
    only: str | None = None,
    jobs: int = 2,
    executor: Executor | None = None,
    out: str | Path | None = None,
) -> SweepOutcome[Any]:
    """Compare a scenario's telemetry techniques against ground truth (as ``tierlab
    telemetry``); ``.report`` is the :class:`tierlab.telemetry.Comparison`, ``.frame()`` its
    table."""
    from tierlab.sweep import api
    from tierlab.telemetry import TelemetryKind

    user, keep = _quick(str(scenario), "telemetry", set) if quick else (list(set or []), None)
    k = TelemetryKind(list(techniques) if techniques is not None else None, baseline=baseline)
    with _executor(jobs, executor) as ex:
        return api.run_kind(
            scenario,
            k,
            seed=seed,
            set=user,
            only=only,
            executor=ex,
            cache_dir=Path(out) / "points" if out is not None else None,
            keep=keep,
        )


@dataclass
class Reproduction:
    """What :func:`reproduce` ran: every paper's figures and claims with their verdicts."""

    papers: list[PaperRun]
    profile: str
    out: Path | None = None
    written: list[Path] = field(default_factory=list)

    def claims(self) -> list[dict[str, str]]:
        """One row per claim: paper, claim id, the claim, verdict and what was measured."""
        return [
            {
                "paper": pr.paper.id,
                "claim": c.claim.id,
                "text": c.claim.claim,
                "verdict": c.outcome.verdict,
                "observed": c.outcome.observed,
            }
            for pr in self.papers
            for c in pr.claims
        ]

    def frame(self, library: str = "pandas") -> Any:
        import pandas as pd

        return to_library(pd.DataFrame(self.claims()), library)

    def __repr__(self) -> str:
        parts = []
        for pr in self.papers:
            held = sum(c.outcome.verdict == "holds" for c in pr.claims)
            parts.append(f"{pr.paper.id}: {held} of {len(pr.claims)} claims hold")
        where = f", report in {self.out}" if self.out is not None else ""
        return f"<Reproduction ({self.profile}) {'; '.join(parts)}{where}>"

    def _repr_html_(self) -> str:
        rows = [(r["paper"], r["text"], r["verdict"], r["observed"]) for r in self.claims()]
        head = f"<p>{html.escape(repr(self))}</p>"
        return head + html_table(rows, ("paper", "claim", "holds?", "tierlab"))


def reproduce(
    paper: str = "all",
    *,
    quick: bool = False,
    profile: str | None = None,
    figures: str | None = None,
    set: Iterable[str] | None = None,
    seed: int | None = None,
    jobs: int = 2,
    executor: Executor | None = None,
    out: str | Path | None = None,
) -> Reproduction:
    """Run a paper's figures and evaluate its claims (as ``tierlab reproduce``); with
    ``out``, write the report there too (``OUT/index.html``) and keep the points."""
    from tierlab._version import version
    from tierlab.reproduce import load, names, report
    from tierlab.reproduce.runner import run_paper
    from tierlab.sweep.cache import ResultCache

    prof = profile or ("quick" if quick else "full")
    papers = names() if paper == "all" else [paper]
    unknown = [p for p in papers if p not in names()]
    if unknown:
        from tierlab.cli.suggest import unknown_message

        raise ValueError(unknown_message("paper", unknown[0], [*names(), "all"]))
    store = ResultCache(Path(out) / "points") if out is not None else None
    runs = []
    import time

    start = time.monotonic()
    with _executor(jobs, executor) as ex:
        for name in papers:
            runs.append(
                run_paper(
                    load(name),
                    prof,
                    ex,
                    store=store,
                    user_set=list(set or []),
                    seed=seed,
                    figures=figures,
                )
            )
        desc = ex.describe()
    result = Reproduction(runs, prof, Path(out) if out is not None else None)
    if out is not None:
        info = report.RunInfo(
            command=f"tierlab.reproduce({paper!r}, profile={prof!r})",
            profile=prof,
            executor=desc,
            wall_seconds=time.monotonic() - start,
            version=version(),
            seed=seed,
            interrupted=any(r.interrupted for r in runs),
        )
        result.written = list(report.write([r for r in runs if r.figures], info, Path(out)))
    return result


@dataclass
class Tuning:
    """What :func:`tune` found: the search (``.search``), best trial first."""

    search: Search

    def frame(self, library: str = "pandas") -> Any:
        import pandas as pd

        rows = [
            {"trial": t.number, **t.params, self.search.objective: t.value, "error": t.error}
            for t in self.search.ranked()
        ]
        return to_library(pd.DataFrame(rows), library)

    @property
    def best(self) -> Any:
        return self.search.best()

    def __repr__(self) -> str:
        s = self.search
        best = s.best()
        b = f", best {best.value:g} with {best.params}" if best is not None else ""
        return f"<Tuning {s.direction} {s.objective} ({s.method}, {len(s.trials)} trials){b}>"

    def _repr_html_(self) -> str:
        df = self.frame().head(15)
        return f"<p>{html.escape(repr(self))}</p>" + str(df.to_html(index=False))


def tune(
    scenario: str | Path,
    params: Mapping[str, str] | Sequence[str],
    objective: str,
    *,
    minimize: bool = False,
    method: str = "grid",
    trials: int = 20,
    grid_points: int = 5,
    point: str | None = None,
    quick: bool = False,
    set: Iterable[str] | None = None,
    seed: int | None = None,
    jobs: int = 2,
    executor: Executor | None = None,
) -> Tuning:
    """Search scenario keys for the best value of a statistic (as ``tierlab tune``).
    ``params``: ``{"tiering.read_hot_threshold": "2:8:2"}`` or ``["KEY=RANGE", ...]``."""
    from tierlab import tune as t

    texts = [f"{k}={v}" for k, v in params.items()] if isinstance(params, Mapping) else params
    user = _quick(str(scenario), "run", set)[0] if quick else list(set or [])
    with _executor(jobs, executor) as ex:
        search = t.run_search(
            str(scenario),
            [t.Param.parse(x) for x in texts],
            objective,
            direction="minimize" if minimize else "maximize",
            method=method,
            trials=trials,
            grid_points=grid_points,
            point=point,
            user_set=user,
            seed=seed,
            executor=ex,
        )
    return Tuning(search)
