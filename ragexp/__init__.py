"""ragexp: a configuration-driven experiment tracker for RAG systems and memory layers.

Importing the package does no work: no downloads, no environment files, no telemetry.
The heavy libraries (mlflow, litellm, torch) are imported where they are used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
