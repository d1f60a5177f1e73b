"""Traced apps that misbehave, for tests/test_user_code.py (issue 41's hostile user): each question's text
says what the app does on it. Keys are built at import so that no test file holds one whole."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import mlflow

KEY = "sk-proj-" + "Zq7" * 8  # provider-shaped: redacted by its shape
VAR_VALUE = "mid-run-" + "Xk9" * 6  # redacted because the app puts it in MY_SERVICE_TOKEN during the run


class Odd(BaseException):
    """Not an Exception: ``except Exception`` does not catch it."""


@mlflow.trace(span_type="RETRIEVER")
def search(question: str) -> list[dict]:
    if "leak" in question:  # the exception event of this span quotes both secrets
        raise RuntimeError(f"the vector store refused {KEY} (token {os.environ['MY_SERVICE_TOKEN']})")
    return [{"page_content": "A honeybee colony has one queen.", "id": "bee-01"}]


def ask(question: str) -> str:
    """One question; its text picks the misbehaviour."""
    if "secret" in question or "leak" in question:
        os.environ["MY_SERVICE_TOKEN"] = VAR_VALUE
    docs = search(question)
    if "exit" in question:
        sys.exit(3)
    if "odd" in question:
        raise Odd("an odd failure")
    if "close" in question:
        sys.stdout.close()
        sys.stderr.close()
    if "hang" in question:
        time.sleep(3600)
    if "secret" in question:
        return f"{docs[0]['page_content']} Use {KEY} or {VAR_VALUE}."
    return docs[0]["page_content"]


def build(linger: bool = True, ignore_sigterm: bool = False, slow: float = 0.0):
    """The app; ``linger`` leaves a non-daemon thread running for ever, ``ignore_sigterm`` ignores SIGTERM,
    ``slow`` seconds per question."""
    if linger:
        threading.Thread(target=time.sleep, args=(3600,), name="app-lingering-thread").start()
    if ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def app(question: str) -> str:
        time.sleep(slow)
        return ask(question)

    return app


def exit_factory():
    sys.exit(3)


def odd_factory():
    raise Odd("cannot build")
