"""``python -m ragexp``: the run command (:mod:`ragexp.cli.run`)."""

from ragexp.cli.run import main

if __name__ == "__main__":
    main()
