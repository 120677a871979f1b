"""`python -m pipelines`: the command line (`pipelines.cli`)."""

import sys

from pipelines.cli import main

sys.exit(main())
