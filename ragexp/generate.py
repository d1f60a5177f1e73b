"""``python -m ragexp.generate``: a test set from your corpus (:mod:`ragexp.cli.generate`)."""

if __name__ == "__main__":
    from ragexp.cli.generate import main

    main()
