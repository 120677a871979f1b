"""The command line every generator of a checked-in file shares (`scripts/settings_table.py`,
`scripts/dbt_sources.py`): print what it renders, `--write` it, or `--check` that the file holds it (exit 1
with the command to run, which a test calls)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def generator_main(argv: list[str] | None, description: str, rendered: str, *, written: str, what: str,
                   write: Callable[[str], None], command: str) -> int:
    """Print `rendered`, write it with `write`, or check it equals `written` (what the file holds now);
    `what` names the file in the help and in the one line a stale file prints."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help=f"write {what}")
    action.add_argument("--check", action="store_true", help=f"exit 1 when {what} is out of date")
    args = parser.parse_args(argv)
    if args.write:
        write(rendered)
    elif args.check:
        if written != rendered:
            print(f"{what} is out of date: run {command}")
            return 1
    else:
        print(rendered, end="" if rendered.endswith("\n") else "\n")
    return 0
