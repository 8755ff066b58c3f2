"""The README's tour as printed: every `tierlab` command of its shell blocks parses as the
command line parses it, and every input file it names inside the repository is there."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO


def tour_commands() -> list[str]:
    """The `tierlab ...` commands of the README's ```sh blocks and its `$ tierlab` lines."""
    text = (REPO / "README.md").read_text()
    out = []
    for block in re.findall(r"```(?:sh)?\n(.*?)```", text, re.S):
        joined = block.replace("\\\n", " ")
        lines = [x.strip() for x in joined.splitlines()]
        if any(x.startswith("$ ") for x in lines):  # a session: commands, then their output
            lines = [x[2:] for x in lines if x.startswith("$ ")]
        out += [x for x in lines if x.startswith("tierlab ")]
    return out


def test_the_tour_has_commands() -> None:
    cmds = tour_commands()
    assert len(cmds) >= 8, cmds
    assert not any("..." in c for c in cmds if c.startswith("tierlab record")), cmds


@pytest.mark.parametrize("command", tour_commands())
def test_a_tour_command_parses_and_its_inputs_exist(command: str) -> None:
    from tierlab.cli.main import build_parser

    words = shlex.split(command, comments=True)
    assert words[0] == "tierlab"
    for i, w in enumerate(words):  # the shell's part: a redirection, a pipe
        if w in (">", ">>", "|", "&&", ";"):
            words = words[:i]
            break
    try:
        build_parser().parse_args(words[1:])
    except SystemExit as e:  # argparse's usage error
        pytest.fail(f"{command!r} does not parse ({e.code})")
    for w in words[1:]:
        path = w.split(":", 1)[0] if w.endswith(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")) else w
        if re.fullmatch(r"(examples|tests|docs|bench)/[\w./-]+\.(c|py|cfg|toml|json)", path):
            assert (REPO / path).exists(), f"{command!r} names {path}, not in the repository"
