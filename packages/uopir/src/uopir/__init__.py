"""The UOp IR: dtypes, hash-consed UOp graphs, pattern rewriting, symbolic algebra, calls, kernel codegen and the C renderer."""

__version__ = "0.1.0"

__all__ = ["__version__"]
