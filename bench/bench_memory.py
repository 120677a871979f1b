"""Peak memory (and CPU) of a sync, measured in a child process so each figure starts from a clean interpreter."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD_FLAG = "--memory-child"
RESULT_PREFIX = "MEMORY_RESULT "


def _maxrss_mib() -> float:
    """This process's peak resident set size so far, in MiB.

    `VmHWM` from /proc/self/status, not `ru_maxrss`: Linux keeps `ru_maxrss` across fork+exec, so a child
    of a large parent reports the parent's size (a 500 MiB parent gave an empty child 513 MiB); `VmHWM`
    belongs to the process's own address space and starts over at exec. Elsewhere, `ru_maxrss` (KiB).
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """User + system CPU seconds this process (all its threads) and its finished children used so far.

    The local work of a sync, apart from the time it spends waiting on the rate limit or the network: a
    rate-bound sync's wall time says little about what it costs the machine."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass
class Meter:
    """Peak RSS and CPU seconds of this process from its creation on: create it after the imports, so
    `figures()` gives the import baseline apart and the CPU of the measured work alone."""

    baseline_mib: float = field(default_factory=_maxrss_mib)
    cpu_start: float = field(default_factory=cpu_seconds)

    def figures(self) -> dict[str, float]:
        """Peak RSS after imports and now (MiB), and CPU seconds since the meter was created."""
        return {"baseline_mib": self.baseline_mib, "peak_mib": _maxrss_mib(),
                "cpu_seconds": cpu_seconds() - self.cpu_start}


def report(result: dict[str, Any]) -> None:
    """Inside a child: hand `result` to the parent (`run_child`) as one prefixed JSON line on stdout."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_child(script: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run `script CHILD_FLAG <spec as JSON>` in a fresh interpreter and return the dict it `report`ed."""
    done = subprocess.run([sys.executable, script, CHILD_FLAG, json.dumps(spec)], capture_output=True, text=True,
                          check=False)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise RuntimeError(f"child {Path(script).name} failed (exit {done.returncode}): {done.stderr[-2000:]}")


def child_main(spec_json: str) -> None:
    """Inside the child: note the peak after imports, run one full sync, print both peaks as JSON."""
    spec = json.loads(spec_json)
    from bench_sync import sync  # imported here so the baseline includes the pipeline's imports

    meter = Meter()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        figures = sync(spec["base_url"], spec["api_key"], spec["window"], Path(tmp))
    report({**meter.figures(), "requests": figures.requests, "wall_seconds": figures.wall_seconds,
            "rows": sum(figures.rows.values())})


def full_sync_peak(script: str, base_url: str, api_key: str, window: float) -> dict[str, Any]:
    """Run `script CHILD_FLAG spec` (a full sync into a fresh temp dir) and return the child's figures."""
    return run_child(script, {"base_url": base_url, "api_key": api_key, "window": window})
