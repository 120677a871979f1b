"""What keeping custom fields fresh costs, two ways, on a 1,000-shipment sandbox world moved an hour at a time:
the two whole lists on a cadence (`/custom_field_definitions`, `/custom_fields`: a page per 100, whatever
changed; what the pipeline does, daily by default), against asking per entity for the shipments and
containers an hourly sync saw change (`/custom_fields?filter[entity_id]=...`: the filter takes one id, so a
request per entity).

    uv run python bench/custom_fields_cost.py [--shipments 1000] [--hours 24] [--seed 7]

Per simulated hour: the shipments whose bundle (the shipment, its containers and their events, as the
`/shipments` pages bring them) changed, and the requests each way. Asserts nothing. Neither way sees an edit
a user makes between listings sooner than the other would by design: an edited custom field changes no
shipment (the service sends no webhook for it either), so following changed entities misses it entirely.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

from bench_minimum import SandboxProbe
from bench_sync import API_KEY
from bench_table import render

from pipelines.api import rows_by_type
from pipelines.settings import PAGE_SIZE
from pipelines.source.bookkeeping import digest
from pipelines.source.pages import owners_of
from pipelines.source.resources import SHIPMENT_INCLUDES
from sandbox.launcher import start_sandbox

START = "2026-11-01T00:00:00+00:00"


def bundles(probe: SandboxProbe) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Every shipment's bundle digest (as `pipelines.source.pages.changed_bundles` digests it) and its containers."""
    members: dict[str, list[dict]] = {}
    containers: dict[str, list[str]] = {}
    params = {"page[size]": PAGE_SIZE, "include": ",".join(SHIPMENT_INCLUDES)}
    for document in probe.client.paginate("/shipments", params=params):
        rows = rows_by_type(document)
        owners = owners_of(rows)
        for shipment in rows.get("shipment", []):
            members[shipment["id"]] = [shipment]
        for type_ in ("container", "transport_event"):
            for row in rows.get(type_, []):
                if (owner := owners.get((type_, row["id"]))) in members:
                    members[owner].append(row)
                    if type_ == "container":
                        containers.setdefault(owner, []).append(row["id"])
    return {shipment_id: digest(rows) for shipment_id, rows in members.items()}, containers


def list_pages(probe: SandboxProbe, path: str) -> int:
    """The pages of a whole list (the custom-field lists carry no total)."""
    return max(1, sum(1 for _ in probe.client.paginate(path, params={"page[size]": PAGE_SIZE})))


def main(argv: list[str] | None = None) -> int:
    """Move the world an hour at a time and print what each way spends, per hour and over the run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=24, help="simulated hours (one sync each)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sandbox = start_sandbox("--shipments", str(args.shipments), "--seed", str(args.seed), "--rate-window", "1",
                            "--speed", "0", "--start", START, "--api-key", API_KEY, timeout=600)  # fmt: skip
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-cf-") as tmp:
        probe = SandboxProbe(sandbox.base_url, API_KEY, 1.0, Path(tmp))
        listing = list_pages(probe, "/custom_field_definitions") + list_pages(probe, "/custom_fields")
        values = sum(len(d["data"]) for d in probe.client.paginate("/custom_fields", params={"page[size]": PAGE_SIZE}))
        before, _ = bundles(probe)
        rows, per_entity_total = [], 0
        for hour in range(1, args.hours + 1):
            probe.advance(3600)
            after, containers = bundles(probe)
            changed = [shipment_id for shipment_id, value in after.items() if before.get(shipment_id) != value]
            entities = len(changed) + sum(len(containers.get(shipment_id, [])) for shipment_id in changed)
            per_entity_total += entities
            rows.append([hour, len(changed), entities, listing])
            before = after
            print(f"  hour {hour}: {len(changed)} shipments changed", file=sys.stderr, flush=True)
        probe.close()
    print(f"\n## Custom fields: whole lists against per entity ({args.shipments:,} shipments, {values:,} values, "
          f"seed {args.seed})\n")  # fmt: skip
    print(render(["simulated hour", "shipments changed", "per entity: requests", "whole lists: requests"], rows))
    days = args.hours / 24
    print(f"\nover {args.hours} h: per entity (hourly syncs) {per_entity_total:,} requests; whole lists every sync "
          f"{listing * args.hours:,}; whole lists daily {math.ceil(days) * listing:,}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
