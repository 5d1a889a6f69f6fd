"""Renderers: a linear program as device source."""

from .base import Renderer
from .cstyle import CRenderer
from .opencl import AMDOpenCLRenderer, OpenCLProgram

__all__ = ["AMDOpenCLRenderer", "CRenderer", "OpenCLProgram", "Renderer"]
