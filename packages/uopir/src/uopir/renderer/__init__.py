"""Renderers: a linear program as device source."""

from .base import Renderer
from .cstyle import CRenderer
from .opencl import AMDOpenCLRenderer

__all__ = ["AMDOpenCLRenderer", "CRenderer", "Renderer"]
