"""``python -m skprior``: the same as the ``skprior`` command."""

import sys

from skprior._cli import main

sys.exit(main())
