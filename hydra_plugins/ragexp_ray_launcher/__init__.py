"""ragexp's Hydra launcher for Ray: ``python -m ragexp -m hydra/launcher=ray ...``.

Hydra finds launchers in the ``hydra_plugins`` namespace and imports every module there whose
name does not start with ``_`` at each start, so this package imports nothing heavy: Ray is
imported by ``_core`` only when a sweep is launched.
"""
