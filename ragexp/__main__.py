"""``python -m ragexp``: the run command (:mod:`ragexp.cli.main`)."""

from ragexp.cli.main import main

if __name__ == "__main__":
    main()
