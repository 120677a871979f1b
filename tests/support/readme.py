"""README.md's commands as the tests that run them read them: the lines of its fenced ```bash blocks, from
the file itself (never a copy), so a command edited in the README is the command tested."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import REPO

README = REPO / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def command(line: str) -> str:
    """A fenced line without its trailing comment (`  # ...`, two spaces before the hash)."""
    return line.split("  #", 1)[0].strip()


def fenced_blocks(path: Path = README, language: str = "bash") -> list[list[str]]:
    """The command lines of each fenced block in `language`, in order: comments and blank lines left out."""
    blocks = []
    for match in _FENCE.finditer(path.read_text()):
        if match[1] == language:
            lines = [command(line) for line in match[2].splitlines()]
            blocks.append([line for line in lines if line and not line.startswith("#")])
    return blocks


def fenced_lines(path: Path = README, language: str = "bash") -> list[str]:
    """Every command line of the file's fenced blocks in `language`, in the order the reader meets them."""
    return [line for block in fenced_blocks(path, language) for line in block]


def block_with(start: str, path: Path = README) -> list[str]:
    """The one bash block of `path` holding a line that starts with `start`."""
    (block,) = [block for block in fenced_blocks(path) if any(line.startswith(start) for line in block)]
    return block
