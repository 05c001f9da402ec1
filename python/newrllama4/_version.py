"""The engine's version: the R package's DESCRIPTION has the same, and checks it on first use."""

__version__ = "0.1.0"
