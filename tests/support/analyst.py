"""An analyst's process for the concurrency test: one read-only session on the lake, kept open, querying
every `--every` seconds (or, with `--long-transaction`, inside one transaction held the whole time) until
stdin closes. Prints one JSON line per query: the newest dlt load it sees, row counts, or the error.

    python -m tests.support.analyst CATALOG_URL [--every 0.5] [--long-transaction]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from pipelines.warehouse import WarehouseStore

QUERY = """
select
    (select max(load_id) from ocean_tracking._dlt_loads) as newest_load,
    (select count(*) from ocean_tracking.transport_events) as events,
    (select count(*) from analytics.container_status) as modelled
"""


def main() -> None:
    """Query until stdin closes; never reconnect."""
    parser = argparse.ArgumentParser()
    parser.add_argument("catalog")
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--long-transaction", action="store_true")
    args = parser.parse_args()
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    with WarehouseStore(catalog=args.catalog).connect(read_only=True) as con:
        if args.long_transaction:
            con.execute("begin transaction")
        print(json.dumps({"ready": True}), flush=True)
        while not closed.is_set():
            started = time.monotonic()
            try:
                load, events, modelled = con.execute(QUERY).fetchone()
                line = {"load": load, "events": events, "modelled": modelled}
            except Exception as error:  # the test counts these: any error is a failure
                line = {"error": f"{type(error).__name__}: {error}"}
            line["seconds"] = round(time.monotonic() - started, 3)
            print(json.dumps(line), flush=True)
            closed.wait(args.every)


if __name__ == "__main__":
    main()
