"""A paper's reproduction as data: the types :mod:`tierlab.reproduce.spec` makes from a
``papers/*.toml`` file (after checking it) and the runner, views and report read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATUSES = ("sourced", "calibrated", "assumed")
#: What a claim's verdict is worth: ``evidence`` (counted: a perturbation of its inputs
#: flips it), ``construction`` (true by construction of the model, or checking the number a
#: free setting was chosen to reach),
#: ``uninformative`` (holds for almost any arrangement of the results: a bound every point
#: meets). Only evidence is counted in the tallies.
BASES = ("evidence", "construction", "uninformative")
COMMANDS = ("run", "telemetry", "pebs-scale")
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
    #: the paper's figures and tables this figure reproduces ("Figure 4", "Table 1")
    covers: tuple[str, ...] = ()

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
    #: ``evidence``, ``construction`` or ``uninformative`` (:data:`BASES`)
    basis: str = "evidence"
    #: why a claim is not evidence (the model's identity, or the bound every point meets)
    basis_note: str = ""
    #: the perturbation its test applies: ``shuffle`` (its column across the points) or
    #: ``mirror`` (the opposite pattern)
    perturb: str = "shuffle"

    @property
    def counted(self) -> bool:
        return self.basis == "evidence"


@dataclass(frozen=True)
class Parameter:
    key: str
    scenarios: tuple[str, ...]
    status: str
    source: str = ""
    calibrated_to: str = ""
    reason: str = ""
    note: str = ""
    #: the words of the source that give the value, and the file under ``../shared`` they
    #: are in (a sourced parameter needs both: tests check the file holds them)
    quote: str = ""
    quote_in: str = ""
    #: the status and text come from the code's declaration of the parameter (the value is
    #: its declared default), not from the paper file
    declared: bool = False

    @property
    def provenance(self) -> str:
        return {"sourced": self.source, "calibrated": self.calibrated_to}.get(
            self.status, self.reason
        )


@dataclass(frozen=True)
class NotReproduced:
    """A figure or table of the paper that ``tierlab reproduce`` gives no verdict for, and
    why (listed on the report's first page)."""

    id: str
    title: str
    reason: str
    command: str = ""


@dataclass(frozen=True)
class Sensitivity:
    """A free parameter (assumed or calibrated) swept over its plausible range: the figure
    runs at each value and the claims it moves are evaluated at each."""

    key: str
    figure: str
    values: tuple[str, ...]
    chosen: str
    claims: tuple[str, ...]
    range_note: str
    points: tuple[str, ...] = ()
    techniques: tuple[str, ...] | None = None
    #: the scenario keys that take the value (default: ``key`` alone; e.g. the same key of
    #: every technique of a telemetry scenario)
    keys: tuple[str, ...] = ()
    #: globs of the point labels that take the value (default: every point; the others are
    #: run as they are, i.e. reused from the figure's own run)
    apply_to: tuple[str, ...] = ()


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
    not_reproduced: tuple[NotReproduced, ...] = ()
    sensitivity: tuple[Sensitivity, ...] = ()

    def figure(self, fid: str) -> FigureSpec:
        for f in self.figures:
            if f.id == fid:
                return f
        raise KeyError(fid)
