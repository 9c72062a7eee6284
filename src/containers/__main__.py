"""``python -m containers``: the command line (see ``containers._cli``)."""

import sys

from containers._cli import main

sys.exit(main())
