"""`python -m amd_isa`: the `amd-isa` command."""

import sys

from .cli import main

sys.exit(main())
