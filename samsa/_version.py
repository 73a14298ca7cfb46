"""The package version, at the bottom of the import graph so any layer can read it."""

__version__ = "0.1.0"
