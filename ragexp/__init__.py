"""ragexp: a configuration-driven experiment tracker for RAG systems and memory layers.

Importing the package does no work: no downloads, no environment files, no telemetry.
The heavy libraries (mlflow, litellm, torch) are imported where they are used; the library API
(:func:`evaluate`, :func:`compare_results`, :class:`EvaluationResult`, :class:`ComparisonResult`,
in :mod:`ragexp.api`) is imported on first use. ``ragexp.compare`` is the module behind
``python -m ragexp.compare``, hence ``compare_results``. The exceptions of :mod:`ragexp.errors`
(``ragexp.DataError``, ``ragexp.ConfigError``, …) are importable from here too.
"""

from ragexp import errors as _errors
from ragexp.version import __version__

#: every exception of ragexp.errors, importable from ragexp itself (``ragexp.DataError``)
_ERRORS = tuple(n for n, v in vars(_errors).items()
                if isinstance(v, type) and issubclass(v, BaseException) and v.__module__ == _errors.__name__)
globals().update({n: getattr(_errors, n) for n in _ERRORS})

__all__ = ["__version__", "evaluate", "compare_results", "EvaluationResult", "ComparisonResult", "mlflow_scorers",
           *_ERRORS]

_API = ("evaluate", "compare_results", "EvaluationResult", "ComparisonResult")


def __getattr__(name: str):
    if name in _API:
        from ragexp import api

        return getattr(api, name)
    if name == "mlflow_scorers":  # ragexp's metrics as mlflow.genai scorers (docs/traces.md)
        from ragexp.tracking.scorers import mlflow_scorers

        return mlflow_scorers
    raise AttributeError(f"module 'ragexp' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(list(globals()) + list(_API) + ["mlflow_scorers"])
