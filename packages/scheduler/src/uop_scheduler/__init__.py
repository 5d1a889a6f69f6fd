"""The lazy Tensor and its scheduler: kernels with correct ordering, autodiff, @function, TinyJit, nn and optim."""

__version__ = "0.1.0"

__all__ = ["__version__"]
