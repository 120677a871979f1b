"""The sandbox's command line (`python -m sandbox --help`): every option says what it does."""

from __future__ import annotations

import argparse

from sandbox.config import build_parser

MAIN_OPTIONS = ("--seed", "--shipments", "--rate-window", "--faults", "--speed", "--start")


def test_every_option_has_help():
    parser = build_parser()
    options = [action for action in parser._actions if action.option_strings and action.dest != "help"]
    undocumented = [action.option_strings[0] for action in options
                    if not action.help or action.help == argparse.SUPPRESS]
    assert undocumented == []
    assert set(MAIN_OPTIONS) <= {flag for action in options for flag in action.option_strings}
    shown = parser.format_help()  # expands every %(default)s: a malformed help string raises here
    assert all(option in shown for option in MAIN_OPTIONS)
