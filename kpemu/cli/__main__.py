"""`python -m kpemu.cli`: the same as the `kpemu` console script."""

import sys

from kpemu.cli import main

sys.exit(main())
