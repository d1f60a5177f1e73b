"""The run as named steps (check, pipeline, score, intervals, save, log), shared by the command
line and the Python API: one code path."""
