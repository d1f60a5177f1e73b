"""Log one evaluation run to MLflow as docs/tracking.md#what-a-run-leaves-in-mlflow describes — from a folder on disk.

:func:`save_results` writes what the run computed into its output folder before anything is
logged; :func:`log_run` logs that folder, at the end of the run or later with
``python -m ragexp.tracking.upload <folder>`` when the store failed.

Params: the few that tell runs apart (:mod:`ragexp.results.params`: each group's option and
the values that differ from it, under stable keys, redacted); aggregate metrics with their
``K/n``, status counts, judge usage and latencies; artifacts ``per_sample.json`` (an MLflow
table), ``config.yaml`` (the whole composed config), ``.hydra/`` and ``summary.json``; a name
(``demo · retriever=bm25 · top_k=5`` unless ``run_name`` is given) and a Markdown description
(:mod:`ragexp.report.describe`); tags for the git commit, the dataset name and digest of its
inputs, the digest of the system's outputs (``ragexp.outputs_digest``) and ragexp's version; the
evaluation set's inputs as the run's MLflow dataset, with its real source. In a multirun the run
is nested under the sweep's parent run.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from ragexp.version import __version__
from ragexp.common.paths import conf_file
from ragexp.common.secrets import redact, redact_url, redact_yaml_file, restore_url, scrub, scrub_columns
from ragexp.tracking.store import (FAILURE_TAG, first_line, bounded_http, creation_lock, get_or_create_experiment, open_client,
                    owner_tags, resolve_uri, retrying)
from ragexp.tracking.launch import PARENT_ENV, PARENT_URI_ENV, find_parent_run, git_commit
from ragexp.errors import DataError, SaveError, Terminated, TrackingError
from ragexp.results.tables import replacing, table_writers
from ragexp.results.columns import FULL_TABLE_FILE, QUESTION_FIELDS, split_json_parts, table_columns, table_note

#: The files a results folder holds. ``mlflow_run.json`` (everything MLflow needs besides the files) is
#: written first, then the tables, then the pictures: a folder is uploadable from its first file on,
#: and an upload logs the files that are there (docs/tracking.md).
SUMMARY_FILE, TABLE_FILE, CONFIG_FILE, MANIFEST_FILE = "summary.json", "per_sample.json", "config.yaml", "mlflow_run.json"
UPLOAD_COMMAND = "python -m ragexp.tracking.upload"
#: a run with human labels also has these (docs/judge-trust.md); the picture is ragexp.report.plots.CONFUSION_PLOT
AGREEMENT_FILE, DISAGREEMENTS_FILE = "agreement.json", "agreement_disagreements.json"


@dataclass
class RunRecord:
    """What a run has saved and logged so far, for the line an interrupt prints (:func:`interrupt_report`):
    the caller makes one and hands it down (``ragexp.workflow.runner.run(cfg, record=...)``)."""

    saved: Path | None = None  # the results folder, once written
    logged: tuple[str, str] | None = None  # (run_id, uri), once logged
    closed: str | None = None  # a run this process created and closed FAILED


def _write(path: Path, text: Any) -> None:
    """``text`` (a string, or an iterable of strings written one by one) into ``path`` atomically:
    a private temporary file renamed into place, removed when the write fails."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for part in ([text] if isinstance(text, str) else text):
            fh.write(part)


def table_rows(tracking: Mapping[str, Any]) -> int:
    """``tracking.table_rows``: the rows of ``per_sample.json`` (its default read from ``conf/tracking/local.yaml``)."""
    return tracking["table_rows"] if "table_rows" in tracking else conf_file("tracking/local")["table_rows"]


@dataclass
class RunResults:
    """What a run computed, as :func:`save_results` writes it. ``per_sample``: the plain per-sample columns, or
    a streamed run's :class:`ragexp.results.tables.StreamedTable` (its Parquet file moved into the folder);
    ``dataset_shape``: what the MLflow dataset input needs of the records (rows, kinds of value);
    ``overrides``: those a config composed outside a Hydra job was composed with (``ragexp.evaluate``), read as
    a job's are (:func:`ragexp.results.params.composed_context`); ``agreement``: agreement with human labels
    (docs/judge-trust.md)."""

    config: Mapping[str, Any]
    tracking: Mapping[str, Any]
    run_name: str | None
    dataset_name: str
    dataset_digest: str
    per_sample: Any
    metrics: Mapping[str, float | None]
    extra_metrics: Mapping[str, float]
    summary: Mapping[str, Any]
    dataset_shape: Mapping[str, Any] | None = None
    hydra_dir: Path | None = None
    sweep_dir: str | None = None
    overrides: Sequence[str] | None = None
    agreement: Mapping[str, Any] | None = None


def save_results(folder: Path, results: RunResults) -> Path:
    """Write the run's results to ``folder`` before anything is logged, so no MLflow failure loses them.

    ``mlflow_run.json`` first (the params, metrics, tags and dataset input), then ``summary.json``,
    ``config.yaml``, the per-sample tables (:func:`ragexp.results.columns.write_tables`), then the
    pictures: whenever the writing stops, what is there can be logged
    (:func:`log_run`, now or later with ``python -m ragexp.tracking.upload <folder>``). A disk that
    fills, or a folder that cannot be written, stops it with a :class:`~ragexp.errors.SaveError`
    saying what was saved where. With ``results.agreement``: ``agreement.json``, the disagreements
    table and the confusion picture.
    """
    import yaml

    folder, r = Path(folder), results
    per_sample, summary, agreement = r.per_sample, r.summary, r.agreement
    rows = table_rows(r.tracking)
    streamed = hasattr(per_sample, "finish")
    n = per_sample.rows if streamed else len(next(iter(per_sample.values()), []))
    saved: list[str] = []

    def step(name: str, write: Any) -> None:
        try:
            write()
        except OSError as exc:
            _not_saved(folder, saved, name, exc)
        if name not in saved:
            saved.append(name)

    step(MANIFEST_FILE, lambda: (folder.mkdir(parents=True, exist_ok=True), _write(
        folder / MANIFEST_FILE, json.dumps(_manifest(folder, r, table_note(n, rows)), indent=2, ensure_ascii=False))))
    step(SUMMARY_FILE, lambda: _write(folder / SUMMARY_FILE, json.dumps(redact(dict(summary)), indent=2,
                                                                        ensure_ascii=False, default=str)))
    step(CONFIG_FILE, lambda: _write(folder / CONFIG_FILE, yaml.safe_dump(redact(dict(r.config)), sort_keys=False,
                                                                          allow_unicode=True)))
    if streamed:  # its cells were scrubbed chunk by chunk
        step(TABLE_FILE, lambda: _write(folder / TABLE_FILE, split_json_parts(table_columns(per_sample.shown()))))
        step(FULL_TABLE_FILE, lambda: per_sample.finish(folder / FULL_TABLE_FILE))
        full = per_sample.plot_columns
    else:
        full = scrub_columns(dict(per_sample))
        for name, write in table_writers(folder, full, _write, rows=rows):
            step(name, write)
    if agreement:  # agreement with human labels: agreement.json, the disagreements table
        step(AGREEMENT_FILE, lambda: _write(folder / AGREEMENT_FILE, json.dumps(
            redact(dict(agreement["agreement"])), indent=2, ensure_ascii=False)))
        step(DISAGREEMENTS_FILE, lambda: _write(folder / DISAGREEMENTS_FILE, split_json_parts(
            scrub_columns(dict(agreement["disagreements"])))))
    if r.tracking.get("plots", True):  # metrics.png, histograms.png (tracking.plots=false skips matplotlib)
        from ragexp.report.plots import run_plots

        step("metrics.png, histograms.png", lambda: run_plots(folder, full, summary, objective=r.config.get("objective")))
        if agreement:
            from ragexp.report.plots import CONFUSION_PLOT, confusion_plot

            step(CONFUSION_PLOT, lambda: confusion_plot(agreement["agreement"], folder / CONFUSION_PLOT))
    return folder


def _not_saved(folder: Path, saved: list[str], name: str, exc: OSError) -> None:
    """Stop saving with one line: what was saved where, what was not, and how to log what is there."""
    reason = exc.strerror or str(exc)
    if not saved:
        raise SaveError(f"could not save the results in {folder} ({reason}): nothing was saved") from None
    raise SaveError(f"could not save {name} in {folder} ({reason}); saved there: {', '.join(saved)}; "
                    f"log what was saved with: {later_command(folder)}") from None


def _manifest(folder: Path, r: RunResults, note: str | None = None) -> dict[str, Any]:
    """What ``mlflow_run.json`` holds: where to log, the run's name, tags, params, metrics, dataset input."""
    from ragexp.report.describe import dataset_source, run_description
    from ragexp.results.params import composed_context, hydra_context, run_params
    from ragexp.results.params import run_name as name_from

    tracking, summary, dataset_name, dataset_digest = r.tracking, r.summary, r.dataset_name, r.dataset_digest
    uri = resolve_uri(tracking.get("uri"))
    choices, typed = hydra_context() if r.overrides is None else composed_context(r.overrides)
    params = run_params(r.config, choices, typed)
    source = dataset_source(summary.get("dataset_source"))
    source = scrub(source) if source else source  # a path or URL may hold credentials
    tags = {
        "ragexp.version": __version__,
        "ragexp.dataset": dataset_name,
        "ragexp.dataset_digest": dataset_digest,
        "mlflow.source.type": "LOCAL",
        "mlflow.note.content": scrub(run_description({**summary, "dataset_source": source})
                                     + (f"\n\n{note}" if note else "")),
    }
    if summary.get("outputs_digest"):
        tags["ragexp.outputs_digest"] = summary["outputs_digest"]
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    parent = find_parent_run(r.sweep_dir)
    if parent:
        tags["mlflow.parentRunId"] = parent
    for k, v in (tracking.get("tags") or {}).items():
        tags[str(k)] = scrub(str(v))
    values = headline_first({k: float(v) for k, v in {**r.metrics, **r.extra_metrics}.items()
                             if v is not None and math.isfinite(v)}, summary.get("headline") or [])
    shape = r.dataset_shape
    dataset = {"name": dataset_name, "digest": dataset_digest, "source": source, **shape} if shape is not None else None
    return {
        "tracking_uri": redact_url(uri),  # never its credentials: log_run restores them (docs/guarantees.md)
        "experiment": tracking.get("experiment") or "ragexp",
        "run_name": scrub(r.run_name) if r.run_name else name_from(dataset_name, params),
        "tags": tags,
        "params": params,
        "metrics": values,
        "dataset": dataset,
        "hydra_dir": _relative(r.hydra_dir, folder) if r.hydra_dir is not None else None,
        "logged": None,
    }


def headline_first(values: Mapping[str, float], headline: list[str]) -> dict[str, float]:
    """The run's metric values in the order they are logged: each headline metric with the ends of its interval
    first, then the rest as computed. MLflow's GenAI *Evaluation runs* table and a run's metrics list show the
    keys in the order they were logged (docs/tracking.md), so the numbers a user came for lead there.

    >>> list(headline_first({"token_precision": 0.1, "answer_token_f1": 0.5, "answer_token_f1/n": 50.0,
    ...     "answer_token_f1/ci_low": 0.4, "answer_token_f1/ci_high": 0.6}, ["answer_token_f1"]))
    ['answer_token_f1', 'answer_token_f1/ci_low', 'answer_token_f1/ci_high', 'token_precision', 'answer_token_f1/n']
    """
    lead = [k + part for k in headline for part in ("", "/ci_low", "/ci_high") if k + part in values]
    return {**{k: values[k] for k in lead}, **{k: v for k, v in values.items() if k not in lead}}


def _relative(path: Path, folder: Path) -> str:
    """``path`` relative to ``folder`` when inside it (the folder can move), else absolute."""
    try:
        return str(Path(path).resolve().relative_to(folder.resolve()))
    except ValueError:
        return str(Path(path).resolve())


def _dataset_shape(columns: Mapping[str, list]) -> dict[str, Any]:
    """What the run's MLflow dataset input needs of the evaluation set's inputs (the columns its digest
    covers, ``results.QUESTION_FIELDS``), kept in ``mlflow_run.json`` instead of the rows: their number,
    and per column two rows of its kinds of value ("" a text, [""] a non-empty list, [] an empty one,
    None where a row lacks the field), from which MLflow infers the schema it gives every row."""
    kinds = {}
    for c, v in columns.items():
        if c in QUESTION_FIELDS:
            first = next((x for x in v if x), next(x for x in v if x is not None))
            kind = "" if isinstance(first, str) else [""] if first else []
            kinds[c] = [kind, None if any(x is None for x in v) else kind]
    return {"rows": len(next(iter(columns.values()), [])), "kinds": kinds}


def _dataset_input(folder: Path, saved: Mapping[str, Any]) -> dict[str, Any] | None:
    """The MLflow dataset input of a saved folder (name, digest, source, schema, profile) as plain data,
    with the schema MLflow's ``from_pandas`` gives the rows, inferred from their kinds of value; ``source``:
    a file's path or ``ragexp:<path>`` for bundled data (:func:`ragexp.report.describe.dataset_source`).
    A folder saved by ragexp 0.1's first releases holds the rows themselves (pandas' split JSON)."""
    if "frame_file" in saved:
        if not (folder / saved["frame_file"]).is_file():
            return None
        split = json.loads((folder / saved["frame_file"]).read_text())
        saved = {**saved, **_dataset_shape({c: [r[i] for r in split["data"]] for i, c in enumerate(split["columns"])})}
    if "kinds" not in saved:  # older still: the input itself
        return dict(saved)
    import warnings

    import pandas as pd
    from mlflow.data.pandas_dataset import from_pandas

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLflow's hint about integer columns in the schema
        out = from_pandas(pd.DataFrame(saved["kinds"]), name=saved["name"], digest=saved["digest"]).to_dict()
    out["profile"] = json.dumps({"num_rows": saved["rows"], "num_elements": saved["rows"] * len(saved["kinds"])})
    if saved.get("source"):  # where the rows came from, rather than MLflow's "code" (the script that logged them)
        out["source_type"], out["source"] = "local", json.dumps({"uri": saved["source"]})
    return out


def later_command(folder: Path) -> str:
    """The command that logs a saved results folder."""
    import shlex

    return f"{UPLOAD_COMMAND} {shlex.quote(str(folder))}"


#: What ``mlflow_run.json`` holds, key → (accepted types, what the line says was expected).
_MANIFEST_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "tracking_uri": ((str,), "a tracking URI"), "experiment": ((str,), "an experiment name"),
    "run_name": ((str, type(None)), "a run name or null"), "tags": ((dict,), "an object of tags"),
    "params": ((dict,), "an object of params"), "metrics": ((dict,), "an object of metric values"),
    "dataset": ((dict, type(None)), "the dataset input or null"), "hydra_dir": ((str, type(None)), "a folder or null"),
    "logged": ((dict, type(None)), "null or {run_id, tracking_uri}"),
}


def read_manifest(folder: Path) -> dict[str, Any]:
    """A results folder's ``mlflow_run.json``, checked before anything is logged: damaged or edited into
    something that cannot be logged, a :class:`~ragexp.errors.DataError` naming the file, the line or the
    field, and what was expected."""
    path = str(Path(folder) / MANIFEST_FILE)
    try:
        manifest = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"cannot be read ({exc.strerror or exc})", path=path) from None
    except UnicodeDecodeError:
        raise DataError("is not UTF-8 text; ragexp writes it: restore it, or run again", path=path) from None
    except ValueError as exc:
        raise DataError(f"is not valid JSON ({exc.msg} at column {exc.colno}); ragexp writes it: restore it, "
                        "or run again", path=path, row=exc.lineno) from None
    if not isinstance(manifest, dict):
        raise DataError(f"expected a JSON object, got {type(manifest).__name__}", path=path)
    for key, (kinds, expected) in _MANIFEST_FIELDS.items():
        if not isinstance(manifest.get(key), kinds):
            raise DataError(f"expected {expected}, got {json.dumps(manifest.get(key))[:60]}", path=path, field=key)
    for group, kinds, expected in (("params", (str,), "a string"), ("tags", (str,), "a string"),
                                   ("metrics", (int, float), "a number")):
        for key, value in manifest[group].items():
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise DataError(f"expected {expected}, got {json.dumps(value)[:60]}", path=path, field=f"{group}.{key}")
    logged = manifest["logged"]
    if logged is not None and not all(isinstance(logged.get(k), str) for k in ("run_id", "tracking_uri")):
        raise DataError("expected null or {run_id, tracking_uri}", path=path, field="logged")
    return manifest


def log_run(folder: Path, *, uri: str | None = None, record: RunRecord | None = None) -> tuple[str, str]:
    """Log a results folder written by :func:`save_results` as one MLflow run; return ``(run_id, uri)``.

    ``uri`` defaults to the store the run was configured for. MLflow's HTTP retries are bounded,
    so a dead server fails in seconds; any failure raises :class:`~ragexp.errors.TrackingError`
    saying where the results are and the command that logs them later. A run this call created
    and could not finish is closed FAILED with its reason (tag ``ragexp.failure_reason``).
    """
    folder = Path(folder).resolve()
    manifest = read_manifest(folder)
    uri = uri or restore_url(manifest["tracking_uri"])
    run_id = None
    try:
        with bounded_http():
            client = open_client(uri)
            with creation_lock(uri):
                exp_id = get_or_create_experiment(client, manifest["experiment"], uri)
            tags = dict(manifest["tags"])
            if redact_url(uri) != manifest["tracking_uri"]:
                tags.pop("mlflow.parentRunId", None)  # the parent lives in the other store
            tags.update(owner_tags())
            run = retrying(client.create_run, exp_id, run_name=manifest["run_name"], tags=tags)
            run_id = run.info.run_id
            _log_contents(client, run, folder, manifest)
            retrying(client.set_terminated, run_id, "FINISHED")
    except BaseException as exc:
        interrupted = not isinstance(exc, Exception)
        reason = (f"{interrupt_reason(exc)} while logging" if interrupted else f"logging failed: {first_line(exc)}")
        if run_id is not None:
            close_failed(uri, run_id, reason)
            if record is not None:
                record.closed = run_id
        if interrupted:
            raise
        what = f"could not log to {redact_url(uri)} ({first_line(exc)})" if not isinstance(exc, TrackingError) else str(exc)
        raise TrackingError(f"{what}; the results are in {folder}; log them later with: "
                            f"{later_command(folder)}") from None
    manifest["logged"] = {"run_id": run_id, "tracking_uri": redact_url(uri)}
    _write(folder / MANIFEST_FILE, json.dumps(manifest, indent=2, ensure_ascii=False))
    if record is not None:
        record.logged = (run_id, uri)
    return run_id, uri


def _log_contents(client: Any, run: Any, folder: Path, manifest: Mapping[str, Any]) -> None:
    """Params, metrics, artifacts and the dataset input of a saved folder, onto an open run.

    In as few store calls as MLflow allows: params, metrics and tags in one ``log_batch`` (MLflow splits
    it at its limits: 100 params, 100 tags, 1,000 entries a call; a retried part is logged once), and
    every artifact in one ``log_artifacts`` of a folder laid out as the run's artifacts (links to the saved
    files, the redacted ``.hydra/``); each call is a transaction (SQLite) or a request (a server)."""
    import time

    from mlflow.entities import Metric, Param, RunTag

    from ragexp.report.plots import CONFUSION_PLOT, RUN_PLOT_FILES

    run_id, artifact_uri = run.info.run_id, run.info.artifact_uri
    params = [Param(k, v) for k, v in manifest["params"].items()]
    now = int(time.time() * 1000)
    metrics = [Metric(k, v, now, 0) for k, v in manifest["metrics"].items()]
    # per_sample.json as an MLflow table: the file as client.log_table writes it, and its tag
    tables = [t for t in (TABLE_FILE, DISAGREEMENTS_FILE) if (folder / t).is_file()]
    tags = [RunTag("mlflow.loggedArtifacts", json.dumps([{"path": t, "type": "table"} for t in tables]))] if tables else []
    missing = [n for n in (SUMMARY_FILE, CONFIG_FILE, TABLE_FILE, FULL_TABLE_FILE) if not (folder / n).is_file()]
    if missing:  # the saving stopped early (a full disk, a kill): what is there is logged, and this says what is not
        tags.append(RunTag("ragexp.missing_files", ", ".join(missing)))
    retrying(client.log_batch, run_id, metrics=metrics, params=params, tags=tags)
    names = (TABLE_FILE, CONFIG_FILE, SUMMARY_FILE, FULL_TABLE_FILE, *RUN_PLOT_FILES,  # the pictures when drawn
             AGREEMENT_FILE, DISAGREEMENTS_FILE, CONFUSION_PLOT)
    hydra_dir = folder / manifest["hydra_dir"] if manifest.get("hydra_dir") else None  # absolute stays absolute
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if (folder / name).is_file():
                _link_or_copy(folder / name, Path(tmp) / name)
        if hydra_dir is not None and hydra_dir.is_dir():  # Hydra's files, secrets redacted (a job's already are)
            (Path(tmp) / ".hydra").mkdir()
            for f in hydra_dir.glob("*.yaml"):
                _link_or_copy(f, Path(tmp) / ".hydra" / f.name)
                redact_yaml_file(Path(tmp) / ".hydra" / f.name)  # a rewritten copy, the saved file untouched
        retrying(client.log_artifacts, run_id, tmp)
    _store_once(artifact_uri, folder, names)
    saved = _dataset_input(folder, manifest["dataset"]) if manifest.get("dataset") else None
    if saved:
        from mlflow.entities import Dataset, DatasetInput, InputTag

        entity = Dataset(**saved)
        retrying(client.log_inputs, run_id,
                 datasets=[DatasetInput(entity, tags=[InputTag("mlflow.data.context", "eval")])])


def _store_once(uri: str, folder: Path, names: Any) -> None:
    """Where the run's artifacts (``uri``) are local files on the results folder's file system, each logged
    copy becomes a hard link to the saved file (one copy on disk, not two); elsewhere nothing changes."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return
    artifacts = Path(url2pathname(parsed.path) if parsed.scheme else uri)
    for name in names:
        src, dst = folder / name, artifacts / name
        tmp = dst.with_name(f".{name}.{os.getpid()}.link")
        try:
            if src.is_file() and dst.is_file() and not os.path.samefile(src, dst) and \
                    src.stat().st_size == dst.stat().st_size:
                os.link(src, tmp)
                os.replace(tmp, dst)
        except OSError:  # another file system, or links refused: the copy stays
            with contextlib.suppress(OSError):
                tmp.unlink()


def _link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` (no copy of a large table), else a copy."""
    import shutil

    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def interrupt_reason(exc: BaseException) -> str:
    """What stopped the process, in words: a SIGTERM, a Ctrl-C, or another exit."""
    if isinstance(exc, Terminated):
        return "terminated (SIGTERM)"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    return f"stopped ({type(exc).__name__})"


def close_failed(uri: str, run_id: str, reason: str, *, if_running: bool = False) -> None:
    """Best effort: the run ends FAILED with its reason rather than RUNNING forever (``if_running``: only a run
    still RUNNING, as a sweep's parent; one left open is closed as orphaned by the next start)."""
    try:
        with bounded_http():
            client = open_client(uri)
            if not if_running or client.get_run(run_id).info.status == "RUNNING":
                client.set_tag(run_id, FAILURE_TAG, reason)
                client.set_terminated(run_id, "FAILED")
    except BaseException:  # noqa: BLE001 - the store may be the very thing that failed
        pass


def interrupt_report(record: RunRecord | None = None) -> str:
    """What an interrupted process logged, in one sentence (the second half of the interrupt line).

    In a multirun: how many of the sweep's runs finished and are logged, under which parent, in
    which store (read from the store, since joblib's workers log them). Otherwise: the run logged,
    or the folder its results were saved in and the command that logs them, or nothing at all.
    """
    record = record or RunRecord()
    parent = os.environ.get(PARENT_ENV)
    if parent:
        return _sweep_report(parent, record)
    if record.logged:
        return f"MLflow run {record.logged[0]} was logged to {record.logged[1]}."
    if record.saved and (record.saved / MANIFEST_FILE).is_file():
        folder = record.saved
        closed = f" (run {record.closed} closed FAILED)" if record.closed else ""
        return f"The results were saved in {folder} but not logged{closed}; log them with: {later_command(folder)}"
    return "No MLflow run was logged: the run had not finished."


def _sweep_report(parent: str, record: RunRecord) -> str:
    uri = os.environ.get(PARENT_URI_ENV) or (record.logged[1] if record.logged else resolve_uri(None))
    try:
        with bounded_http():
            client = open_client(uri)
            exp = client.get_run(parent).info.experiment_id
            children = client.search_runs([exp], filter_string=f"tags.mlflow.parentRunId = '{parent}'", max_results=5000)
    except BaseException:  # noqa: BLE001 - the store may be what failed; say what is known
        return (f"The sweep's runs finished so far are logged under parent run {parent} in {uri} (the store "
                "could not be read to count them); the parent is closed FAILED.")
    done = sum(1 for c in children if c.info.status == "FINISHED")
    return (f"{done} of the sweep's runs finished and are logged under parent run {parent} in {uri} "
            f"({len(children) - done} others FAILED or unfinished); the parent is closed FAILED.")
