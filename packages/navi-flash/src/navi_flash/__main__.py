"""`python -m navi_flash`: the `navi-flash` command."""

import sys

from .cli import main

sys.exit(main())
