"""Render README.md's settings table from `pipelines/settings.py`, where each setting is declared with its
description and default (`setting(...)`). The table sits between two marker comments in README.md.

    python scripts/settings_table.py            # print the table
    python scripts/settings_table.py --write    # replace the table in README.md
    python scripts/settings_table.py --check    # exit 1 when README.md's table is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.settings import SETTINGS  # noqa: E402  (the script runs from anywhere)

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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="replace the table in README.md")
    action.add_argument("--check", action="store_true", help="exit 1 when README.md's table is out of date")
    args = parser.parse_args(argv)
    table = render()
    if args.write:
        README.write_text(with_table(README.read_text(), table))
    elif args.check:
        if table_in(README.read_text()) != table:
            print("README.md's settings table is out of date: run python scripts/settings_table.py --write")
            return 1
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
