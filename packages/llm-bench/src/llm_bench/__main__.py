"""`python -m llm_bench` runs the `llm-bench` command."""

import sys

from .cli import main

sys.exit(main())
