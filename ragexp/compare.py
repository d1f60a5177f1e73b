"""``python -m ragexp.compare``: the comparison command (:mod:`ragexp.cli.compare`)."""

if __name__ == "__main__":
    from ragexp.cli.compare import main

    main()
