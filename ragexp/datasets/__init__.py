"""Dataset adapters, one module per source format (docs/records.md); each returns a :class:`Dataset`.

Pick one with ``dataset=<name>`` (``conf/dataset/<name>.yaml`` names the loader function).
"""

from ragexp.datasets.base import Dataset

__all__ = ["Dataset"]
