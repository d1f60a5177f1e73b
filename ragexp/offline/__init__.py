"""Helpers that run beside ragexp without a model or a network: the scripted stand-in judge server
(``python -m ragexp.standin_judge``, :mod:`ragexp.offline.standin_judge`)."""
