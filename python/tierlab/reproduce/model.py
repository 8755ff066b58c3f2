"""A paper's reproduction as data: the types :mod:`tierlab.reproduce.spec` makes from a
``papers/*.toml`` file (after checking it) and the runner, views and report read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATUSES = ("sourced", "calibrated", "assumed")
COMMANDS = ("run", "telemetry")
PROFILES = ("full", "quick", "smoke")


@dataclass(frozen=True)
class Profile:
    """How a figure is scaled down: the points kept (globs, all when empty), overrides for
    every point, the techniques kept (telemetry), whether a baseline runs, and a note."""

    points: tuple[str, ...] = ()
    set: tuple[str, ...] = ()
    techniques: tuple[str, ...] | None = None
    baseline: bool | None = None
    note: str = ""


@dataclass(frozen=True)
class PaperValues:
    """Numbers transcribed from the paper, with where they come from."""

    title: str
    source: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    tidy: bool = False


@dataclass(frozen=True)
class FigureSpec:
    id: str
    title: str
    paper_ref: str
    scenario: str
    command: str
    view: str
    about: str = ""
    techniques: tuple[str, ...] | None = None
    baseline: bool = True
    profiles: dict[str, Profile] = field(default_factory=dict)
    paper_values: tuple[PaperValues, ...] = ()

    def profile(self, name: str) -> Profile:
        """The figure's profile ``name`` (``full``: as the scenario is; a profile the
        figure does not define runs it in full)."""
        return self.profiles.get(name, Profile())

    def paper_table(self) -> PaperValues | None:
        """The paper's values in tidy form (claims are evaluated on them), if any."""
        return next((v for v in self.paper_values if v.tidy), None)


@dataclass(frozen=True)
class Claim:
    id: str
    figure: str
    claim: str
    paper: str
    source: str
    check: dict[str, Any]
    on_paper: bool = False


@dataclass(frozen=True)
class Parameter:
    key: str
    scenarios: tuple[str, ...]
    status: str
    source: str = ""
    calibrated_to: str = ""
    reason: str = ""
    note: str = ""
    #: the status and text come from the code's declaration of the parameter (the value is
    #: its declared default), not from the paper file
    declared: bool = False

    @property
    def provenance(self) -> str:
        return {"sourced": self.source, "calibrated": self.calibrated_to}.get(
            self.status, self.reason
        )


@dataclass(frozen=True)
class Paper:
    id: str
    title: str
    citation: str
    text: str
    docs: str
    figures: tuple[FigureSpec, ...]
    claims: tuple[Claim, ...]
    parameters: tuple[Parameter, ...]
    origin: str = ""

    def figure(self, fid: str) -> FigureSpec:
        for f in self.figures:
            if f.id == fid:
                return f
        raise KeyError(fid)
