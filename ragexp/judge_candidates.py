"""``python -m ragexp.judge_candidates SWEEP_DIR``: the judge candidates of a dev/test sweep (:mod:`ragexp.cli.judge_candidates`)."""

if __name__ == "__main__":
    from ragexp.cli.judge_candidates import main

    main()
