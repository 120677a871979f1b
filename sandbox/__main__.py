"""`python -m sandbox`: build the world, serve it, and print one ready line with URLs and keys (each
`--account-key` key as `account_key=<account>:<key>`, so a launcher knows which account it reads)."""

from __future__ import annotations

import signal
import sys
import threading
import time

from .auth import extra_account_name
from .config import settings_from_args
from .server import SandboxServer


def main(argv: list[str] | None = None) -> int:
    """Entry point (also the `ocean-tracking-sandbox` script). Runs until SIGINT/SIGTERM."""
    settings = settings_from_args(argv)
    t0 = time.monotonic()
    server = SandboxServer(settings).start()
    keys = " ".join([f"api_key={k}" for k in settings.api_keys]
                    + [f"api_key_no_routing={k}" for k in settings.no_routing_keys]
                    + [f"revoked_key={k}" for k in settings.revoked_keys]
                    + [f"account_key={extra_account_name(i)}:{k}"
                       for i, group in enumerate(settings.account_keys) for k in group])
    print(f"SANDBOX READY base_url={server.base_url} app_url={server.app_url} {keys} "
          f"startup_s={time.monotonic() - t0:.2f}", flush=True)

    # Serve at once; load the sea-lane network and search indexes behind it so the first map or
    # search request does not pay seconds of setup at 100k shipments.
    threading.Thread(target=server.state.world.warm_up, kwargs={"indexes": True}, name="warm-up",
                     daemon=True).start()

    def _stop(signum: int, frame: object) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
