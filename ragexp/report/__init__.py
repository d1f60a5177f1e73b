"""What a person reads: the console tables, the run's pictures and its MLflow description.
Rendering only; nothing here talks to a store."""
