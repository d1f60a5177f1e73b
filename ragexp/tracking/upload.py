"""``python -m ragexp.tracking.upload FOLDER...``: log saved results to MLflow later.

Every run writes ``summary.json``, ``per_sample.json``, ``config.yaml`` and ``mlflow_run.json``
into its output folder before it logs anything (:func:`ragexp.tracking.log.save_results`). When
the store failed at the end (a server down, a disk full), the run says so in one line and names
this command; it logs each folder as the run would have (its traces included), to the store the run was configured
for or to ``--tracking-uri``. A folder already logged is skipped unless ``--again``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragexp.errors import RagexpError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ragexp.tracking.upload",
                                 description="Log the results folders of runs that could not log to MLflow.")
    ap.add_argument("folders", nargs="+", type=Path, help="a run's output folder (it holds mlflow_run.json)")
    ap.add_argument("--tracking-uri", default=None,
                    help="the store to log to (default: the one the run was configured for)")
    ap.add_argument("--again", action="store_true", help="log a folder even if it was logged before")
    args = ap.parse_args(argv)

    from ragexp.common.secrets import redact_url, restore_url, scrub
    from ragexp.tracking.log import MANIFEST_FILE, log_run, read_manifest
    from ragexp.tracking.callbacks import close_after_upload
    from ragexp.tracking.store import check_store, first_line, ui_command
    from ragexp.tracking.traces import log_folder_traces

    status = 0
    uploaded: dict[Path, str] = {}  # a sweep's folder → the store its jobs went to: its parent is closed after
    for folder in args.folders:
        folder = folder.resolve()
        try:
            if not (folder / MANIFEST_FILE).is_file():
                raise RagexpError(f"{folder}: no {MANIFEST_FILE} here; expected the output folder of a ragexp run")
            manifest = read_manifest(folder)
            done = manifest["logged"]
            uri = args.tracking_uri or restore_url(manifest["tracking_uri"])  # saved without credentials
            if done and not args.again:
                print(f"{folder}: already logged as run {done['run_id']} to {done['tracking_uri']} (--again to log it once more)")
                uploaded.setdefault(folder.parent, uri)
                continue
            check_store(uri, manifest["experiment"])
            run_id, uri = log_run(folder, uri=uri)
        except RagexpError as exc:
            print(f"ragexp: error: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{folder}: logged as MLflow run {run_id} to {redact_url(uri)}")
        line = log_folder_traces(folder, uri, run_id)  # its samples as traces, as the run would have logged them
        if line:
            print(line)
        print(f"Open it with:  {ui_command(uri)}")
        uploaded.setdefault(folder.parent, uri)
    for where, uri in uploaded.items():  # a sweep's parent run, closed with its jobs as they stand now
        try:
            line = close_after_upload(where, uri)
        except Exception as exc:  # noqa: BLE001 - the folders are logged; say why the parent is not closed
            print(f"ragexp: error: the sweep's parent run could not be closed: {scrub(first_line(exc))}; run this "
                  "command again when the store answers", file=sys.stderr)
            status = 2
            continue
        if line:
            print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
