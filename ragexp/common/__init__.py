"""The bottom layer, shared by every other: the record, text normalisation and segmentation,
secret redaction, and where ragexp's files live. It imports nothing else of ragexp but
``ragexp.errors``."""
