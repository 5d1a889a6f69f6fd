"""`python -m llm_bench` runs the `llm-bench` command."""

import sys

from .cli import entry

sys.exit(entry())
