"""The reporter contract (:class:`Reporter`), apart from the registry in
:mod:`tierlab.reporters` so that each reporter imports it without importing the registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from tierlab.api import Result


class Reporter(ABC):
    """Writes one kind of output of a run.

    Contract: :meth:`write` creates only files named in :attr:`files` (always written) or
    matching a glob in :attr:`patterns` (written when the run has that kind of output, e.g.
    one directory per sampling technique) inside ``out_dir`` (which exists), each atomically,
    and returns their paths. It must work for interrupted runs and for runs with empty tables.
    """

    #: Short name (``--report`` style selection, messages).
    name: ClassVar[str]
    #: File names this reporter always writes.
    files: ClassVar[tuple[str, ...]] = ()
    #: Globs (``fnmatch``) of the names it writes only when the run has such output.
    patterns: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def write(self, result: Result, out_dir: Path) -> list[Path]:
        """Write this reporter's files into ``out_dir``; return the paths written."""


def save_figure(fig: Any, path: Path | str, fmt: str, dpi: float | None = None) -> None:
    """``fig.savefig`` giving the same bytes for the same figure: an SVG gets no date and
    its element ids come from a fixed salt instead of random ones. The figure gets the
    style's last rules first (:func:`tierlab.plots.finish`: words, ticks, legends)."""
    import matplotlib

    from tierlab.plots import finish

    finish(fig)

    with matplotlib.rc_context({"svg.hashsalt": "tierlab"}):
        if fmt == "svg":
            fig.savefig(path, format=fmt, dpi=dpi, metadata={"Date": None})
        else:
            fig.savefig(path, format=fmt, dpi=dpi)
