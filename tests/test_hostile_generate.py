"""Issue 41, groups 8, 10, 11 and the corpus / records items: hostile corpora and outputs for ``ragexp.generate``,
and hostile ids in ``ragexp.compare``'s sample table.

File names that are not UTF-8 become ids that are valid text; a link to a file outside the corpus folder
is left out; a huge document is cut into bounded passages; an output that is an input is refused before any
work (exit 2, the input byte for byte as it was); a full disk leaves no truncated output (the earlier file
kept, no temporary file), one line naming the file, exit status 4; a Parquet file given as JSON lines is
called a Parquet file; ids and queries with escapes and line breaks reach the terminal escaped."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragexp.errors import ConfigError, DataError

TEXT = ("The red bridge over the Tamar was finished in 1901 by railway engineers from Plymouth, who "
        "built it of iron and stone so that trains could cross the river at its widest point. ")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def folder(tmp_path):
    """A corpus folder: names in Latin-1, Shift-JIS and plain bytes (not UTF-8), a UTF-8 one, links to a file
    outside (a secret) and to one inside."""
    root = tmp_path / "corpus"
    root.mkdir()
    names = [b"caf\xe9.txt", b"\x93\xfa\x96{.md", b"\xff\xfe.txt", "naïve.txt".encode()]
    for i, name in enumerate(names):
        (Path(os.fsdecode(bytes(root) + b"/" + name))).write_text(f"{TEXT} Document {i}.", encoding="utf-8")
    outside = tmp_path / "secret.txt"
    outside.write_text("ssh-rsa AAAA the key of the house " * 10)
    (root / "link_out.txt").symlink_to(outside)
    (root / "link_in.md").symlink_to(root / "naïve.txt")
    return root


def test_corpus_names_not_utf8_and_links_outside(folder, capsys):
    from ragexp.datasets.corpus import read_corpus
    from ragexp.pipeline.chunking import Chunker, corpus_digest
    from ragexp.testset.generator import Candidate
    from ragexp.testset.passages import chunk_passages

    corpus = read_corpus(folder)
    assert "link_out.txt" not in corpus.docs and "link_in.md" in corpus.docs and len(corpus.docs) == 5
    assert all("ssh-rsa" not in t for t in corpus.docs.values())
    assert "1 link(s) to files outside the folder left out" in capsys.readouterr().err
    for doc_id in corpus.docs:
        doc_id.encode("utf-8")  # strict: every id is valid text
        json.dumps(doc_id, ensure_ascii=False).encode("utf-8")
    assert "caf\\xe9.txt" in corpus.docs
    assert len(corpus_digest(corpus.docs)) == 64
    passages = chunk_passages(corpus.docs, Chunker())
    assert Candidate(0, "factoid", passages[:2]).id.startswith("gen-00000-")


@pytest.mark.parametrize("text", [("word " * 2_000_000), ("x" * 3_000_001), ("lorem\n" * 500_000 + "y" * 50_000)])
def test_a_huge_document_gives_bounded_passages(text):
    from ragexp.pipeline.chunking import Chunker
    from ragexp.testset.passages import MAX_PASSAGE_CHARS, chunk_passages

    docs = {"big": text, "small": TEXT}
    passages = chunk_passages(docs, Chunker())
    big = [p for p in passages if p.doc_id == "big"]
    assert all(0 < len(p.text) <= MAX_PASSAGE_CHARS and p.text == docs[p.doc_id][p.start:p.end] for p in passages)
    assert len(big) >= len(text) // MAX_PASSAGE_CHARS and len({p.id for p in passages}) == len(passages)
    assert "".join(p.text for p in big).replace(" ", "").replace("\n", "") == \
        text.replace(" ", "").replace("\n", "")  # nothing lost but the white space between pieces
    assert [p for p in passages if p.doc_id == "small"][0].text == TEXT  # a short document is as it was


def _config(tmp_path: Path, corpus: Path, **over) -> dict:
    from ragexp.common.paths import conf_file

    cfg = {"corpus": {"path": str(corpus)}, "n": 3, "min_words": 5, "kinds": {"factoid": 1},
           "judge": {**conf_file("judge/openai_compatible"), "api_base": "http://127.0.0.1:9",
                     "cache_path": str(tmp_path / "judge.sqlite")},
           "out": str(tmp_path / "testset.jsonl"), "tracking": {"enabled": False}}
    return {**cfg, **over}


def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path, folder):
    from ragexp.workflow.generation import run_generation

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": TEXT}) + "\n" for i in range(4)))
    hard = tmp_path / "hard.jsonl"
    os.link(corpus, hard)
    soft = tmp_path / "soft.jsonl"
    soft.symlink_to(corpus)
    cases = [({"out": str(corpus)}, "out="), ({"report": str(corpus)}, "report="), ({"out": str(hard)}, "out="),
             ({"report": str(soft)}, "report="), ({"out": str(tmp_path / "x" / ".." / "docs.jsonl")}, "out="),
             ({"out": str(tmp_path / "judge.sqlite")}, "out="),
             ({"report": str(tmp_path / "testset.jsonl")}, "the same file")]
    shas = {p: _sha(p) for p in (corpus,)}
    for over, said in cases:
        with pytest.raises(ConfigError, match="input of this command|the same file") as err:
            run_generation(_config(tmp_path, corpus, **over), progress=False)
        assert said in str(err.value) and "\n" not in str(err.value)
    doc = next(p for p in folder.iterdir() if p.name == "link_in.md")
    before = _sha(doc)
    with pytest.raises(ConfigError, match="input of this command"):
        run_generation(_config(tmp_path, folder, out=str(doc)), progress=False)
    assert {p: _sha(p) for p in shas} == shas and _sha(doc) == before
    assert not (tmp_path / "judge.sqlite").exists()  # refused before the judge was built


def test_a_parquet_file_given_as_records_is_named(tmp_path):
    import pandas as pd

    from ragexp.datasets.records import load_records

    f = tmp_path / "records.jsonl"
    pd.DataFrame({"id": ["a"], "query": ["q"]}).to_parquet(f)
    with pytest.raises(DataError, match="a Parquet file, not UTF-8 text .*dataset=mapped"):
        load_records(str(f))


@pytest.mark.parametrize("hostile", ["q\x1b]0;owned\x07", "a\nragexp: all good", "b\x1b[2J\x1b[H", "c\x9b31m",
                                     "d\r[bold]forged[/]", "e\u202eevil"])
def test_the_compare_sample_table_escapes_ids_and_queries(hostile):
    """The cells of ``ragexp.compare``'s table of regressed samples (:func:`ragexp.report.comparison.shown`)."""
    from rich.console import Console
    from rich.table import Table

    from ragexp.report.comparison import shown

    table = Table(title="Samples that regressed most on m")
    for name in ("id", "query", "baseline"):
        table.add_column(name)
    table.add_row(shown(hostile), shown(hostile), "1.0")
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=True, color_system=None).print(table)
    text = out.getvalue()
    assert not any(ch in text for ch in "\x1b\x07\x9b\r\u202e") and "ragexp: all good\n" not in text
    cells = [line for line in text.splitlines() if line.startswith("│")]
    assert len(cells) == 1 and cells[0].count("\\") >= 2  # one row (the header is drawn with ┃), escaped
    assert "[bold]" in text or "[bold]" not in hostile  # markup shown as typed, not read


def _full_disk_run(tmp_path: Path, cmd: list[str], env: dict) -> subprocess.CompletedProcess:
    """``cmd`` with ``tmp_path/full`` a 1 MB tmpfs, filled up (an unprivileged user and mount
    namespace: no root needed)."""
    script = ('mount -t tmpfs -o size=1m tmpfs "$FULL" || exit 99; echo old > "$FULL/testset.jsonl"; '
              'head -c 2000000 /dev/zero > "$FULL/filler" 2>/dev/null; "$@"; status=$?; '
              'echo "LEFT: $(ls -A "$FULL" | tr "\\n" " ")"; echo "OLD: $(cat "$FULL/testset.jsonl")"; exit $status')
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *cmd], env={**env, "FULL": str(tmp_path / "full")},
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)


@pytest.mark.integration
def test_generate_on_a_full_disk_and_over_its_corpus(tmp_path):
    import cli
    from judge_server import JudgeServer

    cli._require("integration", "starts ragexp as a process")
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("no unprivileged mount namespace here (unshare -rm) to make a full disk")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": TEXT * 3 + f" Part {i}."}) + "\n" for i in range(6)))
    (tmp_path / "full").mkdir()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    sha = _sha(corpus)
    with JudgeServer() as server:
        base = [sys.executable, "-m", "ragexp.generate", f"corpus.path={corpus}", "n=4", "judge=openai_compatible",
                f"judge.api_base={server.url}", f"judge.cache_path={tmp_path / 'judge.sqlite'}", "tracking.enabled=false",
                "min_words=5", "progress=false"]
        proc = subprocess.run([*base, f"out={corpus}"], env=env, capture_output=True, text=True, timeout=600,
                              cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "input of this command" in proc.stderr
        assert "Traceback" not in proc.stderr and _sha(corpus) == sha
        full = tmp_path / "full" / "testset.jsonl"
        proc = _full_disk_run(tmp_path, [*base, f"out={full}", f"report={tmp_path / 'report.json'}"], env)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "No space left on device" in proc.stderr and str(full) in proc.stderr
    assert "the earlier file is as it was" in proc.stderr and _sha(corpus) == sha
    assert "LEFT: filler testset.jsonl \n" in proc.stdout and "OLD: old\n" in proc.stdout  # no temporary file


def test_parts_a_killed_run_left_are_removed_by_the_next_one(tmp_path):
    """A process writing per_sample.parquet chunk by chunk (parts of two schemas) killed with SIGKILL leaves
    its ``.per_sample.parquet.<pid>.part*`` files; the next writer in the folder removes them, not a live
    process's; a killed run's ``ragexp_columns_<pid>_*`` folder likewise."""
    import signal

    from ragexp.common.files import remove_leftovers
    from ragexp.results.tables import ParquetStream

    child = ("import sys, time; from pathlib import Path; from ragexp.results.tables import ParquetStream\n"
             "s = ParquetStream(Path(sys.argv[1]) / 'per_sample.parquet', ['m'])\n"
             "s.append({'id': ['a'], 'm': [1.0]}); s.append({'id': ['b'], 'm': ['text']})\n"
             "cols = Path(sys.argv[1]) / 'tmp' / f'ragexp_columns_{__import__(\"os\").getpid()}_x1'\n"
             "cols.mkdir(parents=True); (cols / '0.d').write_bytes(b'1234')\n"
             "print('ready', flush=True); time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", child, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert left == [f".per_sample.parquet.{proc.pid}.part0", f".per_sample.parquet.{proc.pid}.part1"]
    mine = tmp_path / f".per_sample.parquet.{os.getpid()}.part0"
    mine.write_bytes(b"a live process's part")
    ParquetStream(tmp_path / "per_sample.parquet", ["m"])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [mine.name]
    assert [p.name for p in remove_leftovers(tmp_path / "tmp", "ragexp_columns_")] == [f"ragexp_columns_{proc.pid}_x1"]


@pytest.mark.integration
def test_two_generations_at_once_on_one_sqlite_cache_pay_once(tmp_path):
    """Two ``ragexp.generate`` processes started together on the same corpus and cache: each question (and
    its check) is paid for once, the other process reading the stored reply; both test sets are the same."""
    import cli
    from judge_server import JudgeServer

    cli._require("integration", "starts ragexp as a process")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": TEXT * 2 + f" Part {i}."}) + "\n" for i in range(8)))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with JudgeServer(latency=0.4) as server:
        procs = [subprocess.Popen([sys.executable, "-m", "ragexp.generate", f"corpus.path={corpus}", "n=8",
                                   "judge=openai_compatible", f"judge.api_base={server.url}",
                                   f"judge.cache_path={tmp_path / 'judge.sqlite'}", "tracking.enabled=false",
                                   "min_words=5", "progress=false", "kinds={factoid: 1}", f"out={tmp_path / f'{i}.jsonl'}"],
                                  cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(2)]
        outs = [p.communicate(timeout=600) for p in procs]
        calls = server.calls
    assert [p.returncode for p in procs] == [0, 0], outs
    reports = [json.loads((tmp_path / "generation_report.json").read_text())]
    asked = reports[0]["answerability_checks"] + reports[0]["asked"] - reports[0]["not_generated"].get("too_few_passages", 0)
    assert calls <= asked, (calls, asked, outs)  # each question and check once, not twice
    assert (tmp_path / "0.jsonl").read_text() == (tmp_path / "1.jsonl").read_text()


@pytest.mark.integration
def test_a_run_on_a_full_disk_says_which_file_with_status_4(tmp_path):
    """``python -m ragexp`` whose output folder is on a full disk: as Hydra writes its files (``.hydra/``), and
    as the run saves its results (a few kB free): one line naming the file, exit status 4, no traceback."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("no unprivileged mount namespace here (unshare -rm) to make a full disk")
    import cli

    cli._require("integration", "starts ragexp as a process")
    full = tmp_path / "full"
    full.mkdir()
    script = ('mount -t tmpfs -o size=300k tmpfs "$1" || exit 99; head -c 1000000 /dev/zero > "$1/filler" 2>/dev/null; '
              'python -m ragexp tracking.enabled=false hydra.run.dir="$1/a"; echo "rc=$?"; rm "$1/filler"; '
              'head -c 270000 /dev/zero > "$1/filler"; python -m ragexp tracking.enabled=false hydra.run.dir="$1/b"; '
              'echo "rc=$?"')
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(full)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.stdout.splitlines()[-2:] == ["rc=4", "rc=4"], proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ragexp: error:")]
    assert "Traceback" not in proc.stderr and len(errors) == 2, proc.stderr[-3000:]
    assert errors[0] == f"ragexp: error: could not write {full}/a/.hydra/config.yaml: No space left on device"
    assert f"in {full}/b (No space left on device)" in errors[1]
