"""The command lines: ``python -m ragexp`` (:mod:`ragexp.cli.run`), ``python -m ragexp.compare``
and ``python -m ragexp.ui``. Each top-level module of that name is a thin entry point here."""
