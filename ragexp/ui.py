"""``python -m ragexp.ui``: MLflow's UI on ragexp's runs (:mod:`ragexp.cli.ui`)."""

if __name__ == "__main__":
    from ragexp.cli.ui import main

    main()
