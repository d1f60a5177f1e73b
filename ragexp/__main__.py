"""``python -m ragexp``: the run command (:mod:`ragexp.cli.run`).

A SIGTERM that arrives while the command's modules are still being imported (a second or so, before
:func:`ragexp.cli.run.main` installs its own handler) ends the process with its line and exit status 143,
like one that arrives later, instead of the silent default.
"""

import os
import signal


def _terminated_while_starting(signum: int, frame: object) -> None:
    os.write(2, b"ragexp: terminated (SIGTERM) while starting; nothing was run.\n")
    os._exit(143)


if __name__ == "__main__":  # the command, not an import of this module
    signal.signal(signal.SIGTERM, _terminated_while_starting)

from ragexp.cli.run import main  # noqa: E402 - after the handler: this import takes the start's second

if __name__ == "__main__":
    main()
