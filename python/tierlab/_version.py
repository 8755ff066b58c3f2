"""The installed package's version (``tierlab.__version__``), in a module of its own so that
modules the package's ``__init__`` imports can read it without importing the package."""

from __future__ import annotations


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("tierlab")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+unknown"


#: :func:`version`, read once.
VERSION = version()
