"""Where a reproduction's parameter values come from: one declaration each.

A parameter of a paper file (``[[parameters]]``) either states its provenance (``status`` and
its text: the scenario chose the value, and the paper file says why) or states none: then its
value is the default the engine declares (``#[param(...)]``, listed by ``tierlab params``) and
the declaration's provenance is the report's label. :func:`resolve` fills those labels in;
:func:`problems` lists the entries that break the rule (a value that is not the declared
default without a stated provenance; a stated provenance that restates the declaration of the
default; a key nothing declares).
"""

from __future__ import annotations

import dataclasses
import tomllib
from functools import cache
from typing import Any

from tierlab.api import native
from tierlab.reproduce.model import Paper, Parameter

#: the declared status -> the paper file's text field it fills
_TEXT_FIELD = {"sourced": "source", "calibrated": "calibrated_to", "assumed": "reason"}


@cache
def _scenario(scenario: str) -> dict[str, Any]:
    return tomllib.loads(native().export(scenario))


@cache
def _info(scenario: str, key: str) -> dict[str, Any] | None:
    info: dict[str, Any] | None = native().param_info(scenario, key)
    return info


def _lookup(doc: Any, key: str) -> Any:
    cur = doc
    for part in key.split("."):
        name, *idx = part.split("[")
        if name:
            cur = cur[name]
        for i in idx:
            cur = cur[int(i.rstrip("]"))]
    return cur


def _default_value(info: dict[str, Any]) -> Any:
    text = info.get("default")
    if text is None:
        return None
    return tomllib.loads(f"v = {text}")["v"]


def _at_default(scenario: str, key: str, info: dict[str, Any]) -> bool | None:
    """Whether the scenario's value of ``key`` is the declared default (None: no value)."""
    try:
        value = _lookup(_scenario(scenario), key)
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    default = _default_value(info)
    if isinstance(value, int | float) and isinstance(default, int | float):
        return float(value) == float(default)
    return bool(value == default)


def problems(paper: Paper) -> list[str]:
    """Every parameter entry of ``paper`` that breaks the one-declaration rule, as messages
    naming the file, the key and the scenario."""
    out = []
    for i, p in enumerate(paper.parameters):
        where = f"{paper.origin}: parameters[{i}] `{p.key}`"
        for s in p.scenarios:
            info = _info(s, p.key)
            at_default = _at_default(s, p.key, info) if info else None
            if not p.status:
                if info is None:
                    out.append(f"{where}: no parameter of {s} declares this key: give `status`")
                elif not info["status"]:
                    out.append(
                        f"{where}: its declaration states no provenance: declare it in the code "
                        "or give `status` here"
                    )
                elif at_default is False:
                    out.append(
                        f"{where}: {s} sets a value other than the declared default "
                        f"({info['default']}): say where it comes from (`status`)"
                    )
            elif info is not None and at_default and info["status"] in _TEXT_FIELD:
                out.append(
                    f"{where}: {s} uses the declared default, whose provenance the code states "
                    f"({info['status']}: {info['source']}): drop `status` and its text here "
                    "(a `note` may add to it; a wrong label is fixed in the declaration)"
                )
    return out


def resolve(paper: Paper) -> Paper:
    """``paper`` with each entry that states no provenance labelled with its declaration's
    (the first of its scenarios that declares the key)."""
    params: list[Parameter] = []
    for p in paper.parameters:
        if p.status:
            params.append(p)
            continue
        info = next((x for s in p.scenarios if (x := _info(s, p.key))), None)
        if info is None or not info["status"]:
            params.append(
                dataclasses.replace(
                    p, status="assumed", reason="no provenance declared", declared=True
                )
            )
            continue
        status = info["status"]
        text = info["source"] or ("a setting of the experiment" if status == "setting" else "")
        params.append(
            dataclasses.replace(
                p,
                status=status,
                declared=True,
                source=text if status == "sourced" else "",
                calibrated_to=text if status == "calibrated" else "",
                reason=text if status not in ("sourced", "calibrated") else "",
            )
        )
    return dataclasses.replace(paper, parameters=tuple(params))
