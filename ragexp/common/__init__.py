"""The bottom layer, shared by every other: the record, text normalisation and segmentation,
secret redaction, where ragexp's files live, and the guard that refuses a config file or value that
would explode before Hydra reads it (``config_guard``). It imports nothing else of ragexp but
``ragexp.errors``."""
