"""Peak memory of a full sync, measured in a child process so each figure starts from a clean interpreter."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
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


def child_main(spec_json: str) -> None:
    """Inside the child: note the peak after imports, run one full sync, print both peaks as JSON."""
    spec = json.loads(spec_json)
    from bench_sync import sync  # imported here so the baseline includes the pipeline's imports

    baseline = _maxrss_mib()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        figures = sync(spec["base_url"], spec["api_key"], spec["window"], Path(tmp))
    result = {"baseline_mib": baseline, "peak_mib": _maxrss_mib(), "requests": figures.requests,
              "wall_seconds": figures.wall_seconds, "rows": sum(figures.rows.values())}
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def full_sync_peak(script: str, base_url: str, api_key: str, window: float) -> dict[str, Any]:
    """Run `script CHILD_FLAG spec` (a full sync into a fresh temp dir) and return the child's figures."""
    spec = json.dumps({"base_url": base_url, "api_key": api_key, "window": window})
    done = subprocess.run([sys.executable, script, CHILD_FLAG, spec], capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise RuntimeError(f"memory child failed (exit {done.returncode}): {done.stderr[-2000:]}")
