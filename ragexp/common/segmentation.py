"""Chinese word segmentation: ``jieba.lcut(text)`` (accurate mode, HMM on, jieba's default dictionary).

jieba is imported when the first Chinese text is segmented, not before. It loads its dictionary
once per process (about a second) from a cache file it writes on first use; ragexp points jieba's
public ``tmp_dir``/``cache_file`` settings at the user's cache folder — ``$XDG_CACHE_HOME/ragexp/``
(default ``~/.cache/ragexp/``), file ``jieba-<version>.cache`` — instead of the system's temporary
folder. When that folder cannot be created or written, jieba's own default (the temporary folder)
is used. ragexp uses a tokenizer of its own, so words a program adds to ``jieba.dt`` while it runs
(``jieba.add_word``, ``jieba.load_userdict``) do not change ragexp's keywords.

    >>> segment("RAG是一种结合检索和生成的模型架构")
    ['RAG', '是', '一种', '结合', '检索', '和', '生成', '的', '模型', '架构']
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_tokenizer = None
_lock = threading.Lock()


def _start():
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            tokenizer = jieba.Tokenizer()
            try:
                base = os.environ.get("XDG_CACHE_HOME") or ""  # $XDG_CACHE_HOME/ragexp, else ~/.cache/ragexp
                folder = (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "ragexp"
                folder.mkdir(parents=True, exist_ok=True)
                if os.access(folder, os.W_OK | os.X_OK):
                    tokenizer.tmp_dir = str(folder)
                    tokenizer.cache_file = f"jieba-{jieba.__version__}.cache"
            except (OSError, RuntimeError):  # no home, read-only: jieba's default temporary folder
                pass
            tokenizer.initialize()
            _tokenizer = tokenizer
    return _tokenizer


def segment(text: str) -> list[str]:
    """``jieba.lcut(text)``: the words of ``text``."""
    return (_tokenizer or _start()).lcut(text)
