"""Traversal, builders and the one-pass phased materializer (see ``traversal.py`` first)."""
from .debug import print_traversal, print_wiring
from .materializer import Materializer, MaterializerSettings, default_materializer, set_default_materializer

__all__ = ["Materializer", "MaterializerSettings", "default_materializer", "set_default_materializer", "print_traversal", "print_wiring"]
