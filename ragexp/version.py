"""The package's version, in one place: ``pyproject.toml`` reads it from here, and runs record it as
the ``ragexp.version`` tag (docs/tracking.md)."""

__version__ = "0.1.0"
