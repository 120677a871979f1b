"""Render README.md's settings table from `pipelines/settings.py`, where each setting is declared with its
description and default (`setting(...)`). The table sits between two marker comments in README.md.

    python scripts/settings_table.py            # print the table
    python scripts/settings_table.py --write    # replace the table in README.md
    python scripts/settings_table.py --check    # exit 1 when README.md's table is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.settings import SETTINGS  # noqa: E402  (the script runs from anywhere)
from scripts.generated import generator_main  # noqa: E402

README = REPO / "README.md"
BEGIN = "<!-- settings table: generated from pipelines/settings.py by `python scripts/settings_table.py --write` -->"
END = "<!-- end of the settings table -->"


def render() -> str:
    """The settings as a Markdown table: variable, default, what it does; in the order they are declared."""
    rows = ["| variable | default | what |", "|---|---|---|"]
    rows += [f"| `{entry.name}` | {entry.default} | {entry.what} |" for entry in SETTINGS]
    return "\n".join(rows)


def table_in(text: str) -> str:
    """The table between the markers of a README's `text`."""
    begin, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[begin:end].strip("\n")


def with_table(text: str, table: str) -> str:
    """`text` with the table between its markers replaced by `table`."""
    begin, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:begin]}\n{table}\n{text[end:]}"


def main(argv: list[str] | None = None) -> int:
    """Print, write or check README.md's settings table."""
    return generator_main(argv, __doc__, render(), written=table_in(README.read_text()), what="README.md's settings table",
                          write=lambda table: README.write_text(with_table(README.read_text(), table)),
                          command="python scripts/settings_table.py --write")  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
