""" "Did you mean ...?": the closest known names to a misspelt one (scenarios, commands,
techniques, figures, papers)."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable


def close_matches(word: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The known names closest to ``word`` (at most ``n``, best first); a name that starts
    with ``word`` counts as close too (``tiering`` -> ``tiering-kv``, ...)."""
    known = list(dict.fromkeys(known))
    found = difflib.get_close_matches(word, known, n=n, cutoff=0.6)
    if len(found) < n:
        lower = word.lower()
        found += [k for k in known if k.lower().startswith(lower) and k not in found][
            : n - len(found)
        ]
    return found


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean demo?)``, or ``""`` when nothing is close."""
    found = close_matches(word, known)
    if not found:
        return ""
    if len(found) == 1:
        return f" (did you mean {found[0]}?)"
    return f" (did you mean {', '.join(found[:-1])} or {found[-1]}?)"


def unknown_message(what: str, word: str, known: Iterable[str]) -> str:
    """``unknown scenario 'dmeo' (did you mean demo?)``."""
    return f"unknown {what} {word!r}{did_you_mean(word, known)}"


def check_choice(
    parser: argparse.ArgumentParser, what: str, word: str, known: Iterable[str]
) -> None:
    """A usage error (this parser's usage, exit status 2) when ``word`` is not known."""
    known = list(known)
    if word not in known:
        parser.error(unknown_message(what, word, known))
