"""The "How to add" recipes of docs/architecture.md, followed as written.

The engine's recipes (a telemetry technique, a tiering policy, a workload: one file and one
registry line each) are followed by the toy implementations registered for the Rust tests
(`toy_workload_technique_and_policy_added_by_the_recipe_run`); here a CLI command is added the
way the recipe says, and every name the recipes cite is checked to exist in the code, so the
recipes cannot drift from it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import tierlab.cli
from tierlab.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
ARCH = ROOT / "docs" / "architecture.md"

TOY_COMMAND = '''"""``tierlab toycmd``: a command added as docs/architecture.md says."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("toycmd", help="say hello a few times")
    p.add_argument("--times", type=int, default=1)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    print(" ".join(["hello"] * args.times))
    return 0
'''


def test_a_command_is_its_module_plus_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The module `tierlab/cli/toycmd.py` (in a folder of the package's path, not the tree) ...
    (tmp_path / "toycmd.py").write_text(TOY_COMMAND)
    monkeypatch.setattr(tierlab.cli, "__path__", [*tierlab.cli.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "tierlab.cli.toycmd", raising=False)
    # ... and one line in COMMANDS.
    monkeypatch.setattr(cli_main, "COMMANDS", (*cli_main.COMMANDS, "toycmd"))
    assert cli_main.main(["toycmd", "--times", "3"]) == 0
    assert capsys.readouterr().out == "hello hello hello\n"
    with pytest.raises(SystemExit):
        cli_main.main(["--help"])
    assert "toycmd" in capsys.readouterr().out


def _how_to_add() -> str:
    text = ARCH.read_text()
    start = text.index("## How to add")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _sources() -> str:
    """The Rust and Python sources, Rust comments (`//`, `///`, `//!`) left out."""
    parts = []
    for p in ROOT.glob("crates/*/src/**/*.rs"):
        parts.extend(line.split("//")[0] for line in p.read_text().splitlines())
    parts.extend(p.read_text() for p in ROOT.glob("python/tierlab/**/*.py"))
    return "\n".join(parts)


def test_every_name_the_recipes_cite_exists() -> None:
    """Each `Name` or `name()` in backticks in the recipes (types, traits, functions, macros,
    files) is in the code."""
    section = _how_to_add()
    code = _sources()
    missing = []
    # The example of a parameter: a field that exists, as shown.
    for block in re.findall(r"```rust\n(.*?)```", section, re.S):
        for field in re.findall(r"pub (\w+):", block):
            if not re.search(rf"\bpub {field}:", code):
                missing.append(f"example field {field}")
    inline = re.sub(r"```.*?```", "", section, flags=re.S)
    for token in sorted(set(re.findall(r"`([^`\n]+)`", inline))):
        if token.startswith(("tierlab ", ".venv/")):
            continue  # a command line
        if "/" in token or token.endswith((".rs", ".py", ".md", ".toml")):
            path = token.split(" ")[0].replace("<name>", "toy").replace("<kind>", "toy")
            candidates = [
                ROOT / path,
                ROOT / "crates/tierlab-sim/src" / path,
                ROOT / "python/tierlab" / path,
            ]
            if "toy" not in path and not any(c.exists() for c in candidates):
                missing.append(token)
            continue
        for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:!)?", token):
            bare = name.rstrip("!")
            # Placeholders of the templates (`"<name>" => Variant(<name>::ItsParams)`).
            if len(bare) < 4 or bare in {"kind", "name", "shared", "alone", "Variant", "ItsParams"}:
                continue
            if not re.search(rf"\b{re.escape(bare)}\b", code):
                missing.append(f"{token} ({bare})")
    assert not missing, "names the recipes cite but the code lacks:\n" + "\n".join(missing)
