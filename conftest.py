"""The whole suite runs with fresh buffers poisoned (NaN for floats, 0xA5 bytes otherwise; see hcq_runtime's
`poison_enabled`): a program that reads memory nothing wrote gives a visibly wrong answer instead of a lucky zero."""

import os

os.environ.setdefault("UOP_POISON", "1")
