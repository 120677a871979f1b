"""A real browser for the tests: Debian's Chromium, headless, driven by Playwright (`visit_page`).

Never a browser a library downloads: the machines reach no network but the package registries, so
scripts/test installs Debian's `chromium` (scripts/test_packages.sh) and Playwright launches that binary.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where the screenshots the tests take are kept for a person to look at after the run (CI keeps the folder).
ARTIFACTS_DIR = Path(__file__).resolve().parents[2] / "test-artifacts"


@dataclass
class PageVisit:
    """What the browser saw opening a page: every request it made (URL), the console's errors and the page's
    uncaught exceptions, the page's `window.pageReport` (marks drawn per chart), every table's cells by
    `data-table` (rows of {field: data-value, else the text}), each table's links by row, and how long the
    charts took to render (from navigation to `body[data-rendered]` counting every chart)."""

    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    report: dict[str, int] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    links: dict[str, list[str | None]] = field(default_factory=dict)
    render_seconds: float = 0.0


def chromium_path() -> str:
    """Debian's Chromium; one line saying how to get it when it is missing."""
    found = shutil.which("chromium")
    if found is None:
        raise AssertionError("Chromium is missing: run scripts/test (it installs Debian's chromium) or "
                             "apt-get install -y chromium")  # fmt: skip
    return found


READ_TABLES = """() => Object.fromEntries([...document.querySelectorAll('table[data-table]')].map((table) => [
  table.dataset.table,
  [...table.querySelectorAll('tbody tr')].map((row) => Object.fromEntries([...row.querySelectorAll('td')].map(
    (cell) => [cell.dataset.field, cell.dataset.value !== undefined ? Number(cell.dataset.value) : cell.textContent]))),
]))"""
READ_LINKS = """() => Object.fromEntries([...document.querySelectorAll('table[data-table]')].map((table) => [
  table.dataset.table,
  [...table.querySelectorAll('tbody tr')].map((row) => row.querySelector('a') ? row.querySelector('a').href : null),
]))"""


def visit_page(path: Path, *, screenshot: Path | None = None, timeout_seconds: float = 60.0) -> PageVisit:
    """Open `path` (a file) in headless Chromium, wait until every chart in `#page-charts` has rendered (or
    the page reports a failure, or `timeout_seconds`), and return what it saw (`PageVisit`); with
    `screenshot`, a full-page PNG there."""
    from playwright.sync_api import sync_playwright

    visit = PageVisit()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("request", lambda request: visit.requests.append(request.url))
            page.on("console", lambda message: visit.errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: visit.errors.append(str(error)))
            started = time.monotonic()
            page.goto(path.resolve().as_uri())
            page.wait_for_function(
                "() => document.body.dataset.failed || Number(document.body.dataset.rendered) === "
                "Object.keys(JSON.parse(document.getElementById('page-charts').textContent)).length",
                timeout=timeout_seconds * 1000)  # fmt: skip
            visit.render_seconds = time.monotonic() - started
            failed = page.evaluate("() => document.body.dataset.failed")
            if failed:
                visit.errors.append(f"the page reported: {failed}")
            visit.report = page.evaluate("() => window.pageReport || {}")
            visit.tables = page.evaluate(READ_TABLES)
            visit.links = page.evaluate(READ_LINKS)
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return visit
