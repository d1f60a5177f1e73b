"""A run's computation without side effects beyond its results folder: scoring records with a
metric suite, the per-sample and summary tables, pairing two runs, and the gate."""
