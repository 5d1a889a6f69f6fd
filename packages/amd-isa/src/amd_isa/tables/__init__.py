"""Generated per-architecture encoding tables (see tools/gen_tables.py)."""
