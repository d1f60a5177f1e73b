"""``python -m ragexp.standin_judge``: a scripted stand-in judge to try the judge metrics without a model
(:mod:`ragexp.offline.standin_judge`)."""

if __name__ == "__main__":
    from ragexp.offline.standin_judge import main

    main()
