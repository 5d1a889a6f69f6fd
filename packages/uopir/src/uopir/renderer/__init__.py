"""Renderers: a linear program as device source."""

from .base import Renderer
from .cstyle import CRenderer

__all__ = ["CRenderer", "Renderer"]
