"""What a run leaves on disk, apart from MLflow: the per-sample table's columns and digests
(``columns``), the Parquet and column files a run writes (``tables``), the params that tell a run
apart, flattened and redacted (``params``), and a sweep job's missed gate floors (``gate_files``).
Nothing here talks to MLflow (``ragexp.tracking`` does)."""
