"""Start the sandbox as a child process and read its ready line (for the demo, benchmarks and tests).

The pipeline never imports the sandbox: it talks to it over HTTP like to the real service, so the
sandbox is launched as `python -m sandbox` and known only by the URLs and keys it prints. This module
lives with the sandbox because the ready line is the sandbox's own output format.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field


@dataclass
class SandboxProcess:
    """A running sandbox: its URLs, its full-entitlement key, the child process, and the keys of each
    account given with `--account-key` (account name -> keys, in the order given)."""

    base_url: str
    app_url: str
    api_key: str
    process: subprocess.Popen = field(repr=False)
    accounts: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def stop(self) -> None:
        """Terminate the sandbox and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)  # reap it

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parse_ready_line(line: str) -> dict[str, str]:
    """`SANDBOX READY base_url=... app_url=... api_key=...` -> {name: value} (first value per name)."""
    values: dict[str, str] = {}
    for token in line.split():
        name, sep, value = token.partition("=")
        if sep and name not in values:
            values[name] = value
    return values


def parse_account_keys(line: str) -> dict[str, tuple[str, ...]]:
    """The ready line's `account_key=<account>:<key>` tokens -> {account: keys in order}."""
    accounts: dict[str, tuple[str, ...]] = {}
    for name, value in (token.partition("=")[::2] for token in line.split()):
        if name == "account_key":
            account, _, key = value.partition(":")
            accounts[account] = (*accounts.get(account, ()), key)
    return accounts


def start_sandbox(*args: str, timeout: float = 60.0) -> SandboxProcess:
    """Launch `python -m sandbox --port 0 <args>` and block until it prints its ready line (pass
    `--account-key KEY[,KEY...]` in `args` for accounts of their own; `.accounts` names them)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("SANDBOX READY"):
            values = parse_ready_line(line)
            return SandboxProcess(values["base_url"], values["app_url"], values["api_key"], process,
                                  parse_account_keys(line))
    process.kill()
    raise RuntimeError(f"the sandbox did not start within {timeout:.0f}s (exit code {process.poll()})")
