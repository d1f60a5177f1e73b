"""``python -m ragexp.generate`` and ``dataset.corpus=``: a test set from a corpus, through the stand-in judge
(tests/judge_server.py, a real OpenAI-compatible server, so litellm and the judge's client run for real)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import cli
from conftest import DATA, ROOT
from judge_server import JudgeServer, Reply

from ragexp.common.paths import conf_file

SQUAD = DATA / "squad2" / "dev-v2.0.json"


def squad_corpus(path: Path, limit: int | None = None) -> dict[str, str]:
    """SQuAD v2's paragraphs (the first ``limit``) as a corpus file of ``{"id", "text"}`` lines."""
    from ragexp.datasets.squad2 import load_squad2

    docs = dict(list(load_squad2(str(SQUAD)).corpus.items())[:limit])
    with open(path, "w", encoding="utf-8") as fh:
        for k, v in docs.items():
            fh.write(json.dumps({"id": k, "text": v}) + "\n")
    return docs


TEXTS = ["The red bridge over the Tamar was finished in 1901 by railway engineers from Plymouth.",
         "Stone walls around the orchard kept sheep away from the young apple trees until 1955.",
         "An iron foundry in Coalbrookdale cast the cylinders for early steam pumping engines.",
         "Old maps of the harbour show three wooden piers where fishing boats unloaded herring.",
         "A long tunnel beneath the Alps shortened the journey between Milan and Zurich by hours."]


def run_module(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m …`` as a user types it (this interpreter), in ``cwd``; its exit status must be 0."""
    cli._require("integration", "starts ragexp as a process")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    argv = shlex.split(command)
    assert argv[:2] == ["python", "-m"], command
    proc = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{command}\nSTDOUT:\n{proc.stdout[-3000:]}\nSTDERR:\n{proc.stderr[-3000:]}"
    return proc


def adds_up(report: dict) -> bool:
    return report["asked"] == report["kept"] + sum(sum(report[g].values()) for g in ("filtered", "failed", "not_generated"))


def config(tmp_path: Path, corpus: Path, url: str, **over) -> dict:
    cfg = {"corpus": {"path": str(corpus)}, "n": 10, "seed": 0, "min_words": 5,
           "kinds": {"factoid": 0.4, "descriptive": 0.3, "multi": 0.3},
           "filters": {"question_words": [4, 40], "answer_max_words": 80, "duplicate_similarity": 0.8},
           "chunker": {"_target_": "ragexp.pipeline.chunking.Chunker", "name": "none", "size": None},
           "judge": {**conf_file("judge/openai_compatible"), "api_base": url,
                     "cache_path": str(tmp_path / "judge.sqlite"), "max_retries": 0, "backoff_s": 0.05},
           "out": str(tmp_path / "testset.jsonl"), "tracking": {"enabled": False}}
    for k, v in over.items():
        cfg[k] = {**cfg[k], **v} if k in ("judge", "filters") else v
    return cfg


def docs_commands() -> list[str]:
    """The commands of docs/testset.md's quick start, as written there."""
    text = (ROOT / "docs" / "testset.md").read_text(encoding="utf-8")
    block = text[text.index("# run by tests/test_generate.py"):]
    block = block[:block.index("```")]
    return [line for line in block.splitlines() if line.startswith("python -m ") and not line.endswith("&")]  # the
    # judge's line (… &) is this test's JudgeServer, on a free port


@pytest.mark.integration
def test_squad_paragraphs_to_a_test_set_that_ragexp_evaluates_as_the_docs_say(tmp_path):
    """docs/testset.md's commands on the shipped SQuAD paragraphs as ``docs.jsonl``: n=40 questions whose every
    gold id is in the corpus, a report that adds up, an MLflow run, a re-run without a call, and the set
    evaluated by ``python -m ragexp`` (BM25 alone, then a BM25/dense sweep) without a warning."""
    generate, evaluate, sweep = docs_commands()
    docs = squad_corpus(tmp_path / "docs.jsonl", limit=200)  # 200 of the 646: the dense index in seconds
    with JudgeServer() as server:
        first = run_module(generate.replace("http://127.0.0.1:8000/v1", server.url), cwd=tmp_path)
        paid = server.calls
        records = [json.loads(line) for line in (tmp_path / "testset.jsonl").read_text().splitlines()]
        report = json.loads((tmp_path / "generation_report.json").read_text())
        assert report["asked"] == 40 and adds_up(report) and report["kept"] == len(records) > 0, first.stdout
        assert f"asked 40 = kept {len(records)}" in first.stdout
        assert "warning" not in (first.stdout + first.stderr).lower(), first.stderr[-2000:]  # MLflow's hints quiet
        assert paid == report["generated"] + report["answerability_checks"]  # one call each, nothing re-asked
        assert all(g in docs for r in records for g in r["gt_context_ids"])
        assert all(c.split("#")[0] in docs for r in records for c in r["gt_chunk_ids"])
        assert {r["question_type"] for r in records} == {"factoid", "descriptive", "multi"}
        assert all(len(r["gt_context_ids"]) == 2 for r in records if r["question_type"] == "multi")
        span = records[0]["gt_spans"][0]
        assert docs[span["doc_id"]][span["start"]:span["end"]].strip()
        from ragexp.workflow.generation import run_generation

        cfg = config(tmp_path, tmp_path / "docs.jsonl", server.url, n=40, min_words=30, out=str(tmp_path / "again.jsonl"),
                     judge={"cache_path": str(tmp_path / ".ragexp_cache" / "judge.sqlite")},
                     kinds={"factoid": 0.4, "descriptive": 0.3, "multi": 0.3, "unanswerable": 0.0})
        again = run_generation(cfg, progress=False)  # the same command, in this process (one start-up less)
        assert server.calls == paid  # a re-run asks nothing new: every reply comes from the judge cache
        assert again["judge"]["cache_hits"] == paid and again["kept"] == len(records)
    assert (tmp_path / "again.jsonl").read_text() == (tmp_path / "testset.jsonl").read_text()  # seeded: the same set
    client, found = cli.runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert len(found) == 1 and found[0].data.metrics["testset/kept"] == len(records)
    assert found[0].inputs.dataset_inputs[0].tags[0].value == "testset"
    assert {a.path for a in client.list_artifacts(found[0].info.run_id)} >= {"testset.jsonl", "generation_report.json",
                                                                              "generate_config.json"}
    for command in (evaluate, sweep):
        said = run_module(command, cwd=tmp_path)
        told = said.stdout + said.stderr
        assert "warning" not in told.lower(), told[-2000:]
        for line in told.splitlines():  # no metric skipped for want of a field the test set should carry
            assert not re.search(r"need [^;]*'(query|reference_answers|gt_contexts|gt_context_ids)'", line), line
        assert "context_recall" in told and (command == evaluate or "holds 2 child runs" in told), told[-2000:]


def test_duplicated_documents_give_no_duplicate_questions(tmp_path):
    texts = TEXTS
    corpus = tmp_path / "dups.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"{c}{i}", "text": t}) + "\n" for i, t in enumerate(texts) for c in "ab"))
    from ragexp.workflow.generation import run_generation

    with JudgeServer() as server:
        report = run_generation(config(tmp_path, corpus, server.url, kinds={"factoid": 1}), progress=False)
    queries = [json.loads(line)["query"] for line in Path(tmp_path / "testset.jsonl").read_text().splitlines()]
    assert len(queries) == len(set(queries)) == report["kept"] == 5
    assert report["filtered"]["near_duplicate"] == 5 and adds_up(report)


def test_a_judge_that_returns_garbage_gives_per_item_statuses(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text": f"Document {i} tells how the mill at Ashford ground "
                                                          f"{i * 10} sacks of grain each day."}) + "\n" for i in range(6)))
    from ragexp.workflow.generation import run_generation

    with JudgeServer(script=lambda r: Reply(text="I would rather talk about turtles.")) as server:
        report = run_generation(config(tmp_path, corpus, server.url, n=6), progress=False)
    assert report["kept"] == 0 and report["failed"] == {"parse_error": 6} and adds_up(report)
    assert all("no JSON object" in item["detail"] for item in report["items"])
    assert "6 fewer than asked" in capsys.readouterr().err


def test_a_key_the_model_writes_reaches_no_file_of_the_generation(tmp_path, capsys):
    """Issue 41 group 6: a provider-shaped key in the model's replies (a question quoting it, a reply that
    cannot be read) is redacted in testset.jsonl, generation_report.json, the console, the judge's cache and
    the MLflow run (its store's bytes, the dataset and artifacts)."""
    key = "sk-proj-" + "Qw3" * 8
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    from ragexp.workflow.generation import run_generation

    def script(request):
        return Reply(text=f"I would rather share the key {key} than a question.")

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with JudgeServer(script=script) as server:
        report = run_generation(config(tmp_path, corpus, server.url, n=3, tracking={"enabled": True, "uri": uri}),
                                progress=False)
    assert report["failed"] == {"parse_error": 3}
    said = (tmp_path / "generation_report.json").read_text()
    assert "the key *** than a question" in said  # the reply was kept, redacted
    leaks = [str(f) for f in tmp_path.rglob("*") if f.is_file() and key.encode() in f.read_bytes()]
    out = capsys.readouterr()
    assert not leaks and key not in out.out + out.err, leaks


def test_unanswerable_questions_on_request_and_a_budget_stop_accounted_for(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    from ragexp.workflow.generation import run_generation

    with JudgeServer() as server:
        report = run_generation(config(tmp_path, corpus, server.url, n=4, kinds={"unanswerable": 1}), progress=False)
        records = [json.loads(line) for line in Path(tmp_path / "testset.jsonl").read_text().splitlines()]
        assert report["kept"] == 4 and all(r["answerable"] is False and "reference_answers" not in r for r in records)
        assert all(r["answerability_verdict"]["answerable"] is False for r in records)
        budget = {"max_cost_usd": 0.0005, "cost_per_million_in": 1000.0, "cost_per_million_out": 1000.0,
                  "max_concurrency": 1, "cache": False}
        report = run_generation(config(tmp_path, corpus, server.url, n=5, judge=budget), progress=False)
    assert report["not_generated"].get("budget", 0) > 0 and adds_up(report)


@pytest.mark.parametrize("content, said", [
    (b"", "the corpus is empty"),
    # a byte that is not UTF-8 is told at its row (98b2e6b: in file order; bytes(range(256)) starts with a
    # line of control characters, which is an unreadable JSON line at row 1 before any such byte)
    (bytes(range(255, -1, -1)) * 4, "row 1: unreadable: not UTF-8 text"),
    (b'{"id": "a", "body": "text"}\n', "row 1, field 'text'"),
    (b'{"id": "a", "text": "too short to ask"}\n', "documents too short to ask about"),
])
def test_bad_corpora_are_one_line(tmp_path, content, said):
    from ragexp.errors import DataError
    from ragexp.workflow.generation import run_generation

    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(content)
    with pytest.raises(DataError, match=said) as err:
        run_generation(config(tmp_path, corpus, "http://127.0.0.1:9/v1", min_words=30), progress=False)
    assert "\n" not in str(err.value) and str(corpus) in str(err.value)


def test_dataset_corpus_for_records_reports_unknown_ids(tmp_path, capsys):
    from omegaconf import OmegaConf

    from ragexp.workflow.runner import load_dataset

    folder = tmp_path / "docs"
    (folder / "guides").mkdir(parents=True)
    (folder / "guides" / "setup.md").write_text("# Setup\nInstall it with pip.")
    (folder / "faq.txt").write_text("Questions and answers.")
    (folder / "empty.txt").write_text("  \n")
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "1", "query": "How to install?", "gt_context_ids": ["guides/setup.md"]}) + "\n"
                 + json.dumps({"id": "2", "query": "What else?", "gt_context_ids": ["faq.txt", "gone.md"]}) + "\n")
    cfg = OmegaConf.create({"_target_": "ragexp.datasets.records.load_records", "path": str(q), "corpus": str(folder),
                            "corpus_columns": None})
    ds = load_dataset(cfg)
    assert ds.corpus == {"faq.txt": "Questions and answers.", "guides/setup.md": "# Setup\nInstall it with pip."}
    err = capsys.readouterr().err
    assert "1 of 3 gt_context_ids are not in the corpus" in err and "'gone.md'" in err
    assert ds.info["gt_ids_not_in_corpus"] == 1
    table = tmp_path / "docs.csv"
    table.write_text('doc,body\nguides/setup.md,"Install it, with pip."\nfaq.txt,Questions.\ngone.md,Back again.\n')
    cfg = OmegaConf.merge(cfg, {"_target_": "ragexp.datasets.mapped.load_mapped", "corpus": str(table),
                                "corpus_columns": {"id": "doc", "text": "body"}})
    ds = load_dataset(cfg)
    assert ds.corpus["guides/setup.md"] == "Install it, with pip." and ds.info["gt_ids_not_in_corpus"] == 0


def test_the_language_filter_drops_a_question_in_another_language_than_its_passage():
    from ragexp.testset.checks import language

    passage = ("La tour Eiffel a été construite pour l'Exposition universelle de 1889 à Paris par l'entreprise "
               "de Gustave Eiffel.")
    assert language("Pour quelle exposition la tour Eiffel a-t-elle été construite ?", passage) == (None, None)
    assert language("Who built the tower that was finished in 1889 for the world fair?", passage)[1] \
        == "question in 'en' (1.00), passage in 'fr'"
    assert language("誰がエッフェル塔を建てましたか", passage)[1] == "question in CJK script, passage in LATIN"


def test_too_few_passages_for_n_says_the_chunker_setting_that_gives_enough(tmp_path, capsys):
    """n larger than the passages to ask about: one warning naming the chunker setting; with it, every item is
    asked (issue 40: 355 of 1,000 SQuAD questions were 'not generated: too_few_passages' without a hint)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": " ".join(TEXTS * 4)[i:] }) + "\n" for i in range(3)))
    from ragexp.workflow.generation import run_generation

    with JudgeServer() as server:
        report = run_generation(config(tmp_path, corpus, server.url, n=9, kinds={"factoid": 1}), progress=False)
        err = capsys.readouterr().err
        assert report["not_generated"].get("too_few_passages") == 6 and adds_up(report)
        said = [line for line in err.splitlines() if "questions will not be generated" in line]
        assert len(said) == 1 and "chunker=words chunker.size=" in said[0], err
        size = int(said[0].split("chunker.size=")[1].split()[0])
        chunker = {"_target_": "ragexp.pipeline.chunking.Chunker", "name": "words", "size": size, "overlap": 0,
                   "unit": "words"}
        again = run_generation(config(tmp_path, corpus, server.url, n=9, kinds={"factoid": 1}, chunker=chunker,
                                      out=str(tmp_path / "again.jsonl")), progress=False)
    assert "too_few_passages" not in again["not_generated"] and adds_up(again)
    assert "questions will not be generated" not in capsys.readouterr().err


@pytest.mark.integration
def test_an_interrupted_generate_keeps_every_reply_it_received(tmp_path):
    """Ctrl-C in the middle of ``python -m ragexp.generate``: exit 130 with its one line, every reply received is in
    the judge cache (only the requests in flight, at most judge.max_concurrency, are lost), and the same command
    then pays only for the rest (docs/testset.md, "Re-runs, interruptions, budget")."""
    import signal
    import sqlite3
    import time

    cli._require("integration", "starts ragexp as a process")
    squad_corpus(tmp_path / "docs.jsonl", limit=80)
    command = (f"python -m ragexp.generate corpus.path=docs.jsonl n=60 min_words=20 judge=openai_compatible "
               f"judge.max_concurrency=4 tracking.enabled=false progress=false")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    with JudgeServer(latency=0.2) as server:
        argv = [sys.executable, *shlex.split(command)[1:], f"judge.api_base={server.url}"]
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while server.calls < 30 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        sent = server.calls
        assert proc.returncode == 130 and "interrupted; every reply received is in the judge cache" in err, err[-2000:]
        with sqlite3.connect(tmp_path / ".ragexp_cache" / "judge.sqlite") as db:
            cached = db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
        assert 30 - 4 <= sent - 4 <= cached <= sent < 120, (sent, cached)  # stopped mid-run; in flight lost at most
        assert not (tmp_path / "testset.jsonl").exists()
        server.reset()
        run_module(f"{command} judge.api_base={server.url}", cwd=tmp_path)
        report = json.loads((tmp_path / "generation_report.json").read_text())
    asked = report["generated"] + report["answerability_checks"]
    assert report["judge"]["cache_hits"] == cached and server.calls == report["judge"]["calls"] == asked - cached
    assert adds_up(report) and report["asked"] == 60


def test_the_side_work_starts_once_a_reply_is_back_and_waiting_items_follow_it(tmp_path):
    """The side work (bm25s' import, BM25, the language models: CPU under the GIL) starts once the first reply is
    back, not while litellm's first call, which every request waits for, is still under way (docs/performance.md,
    "Test-set generation"); the items that wait for it are asked after it."""
    import concurrent.futures

    from ragexp.judge import build_judge
    from ragexp.testset.generator import Candidate, Limits, generate
    from ragexp.testset.passages import Passage

    passages = [Passage(f"d{i}#0", f"d{i}", 0, len(t), t) for i, t in enumerate(TEXTS)]
    seen: dict[str, int] = {}

    def side() -> concurrent.futures.Future:
        with server.lock:  # the requests the server has answered by now
            seen["answered"], seen["calls"] = server.calls - server.in_flight, server.calls
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result(None)
        return done

    with JudgeServer(latency=0.3) as server:
        judge = build_judge(config(tmp_path, tmp_path / "unused.jsonl", server.url)["judge"])
        warm = Passage("w#0", "w", 0, 60, "Tin mines on the Cornish coast closed one by one after 1870.")
        generate(judge, [Candidate(9, "factoid", [warm])], Limits())  # litellm's first call made: no load
        server.reset()  # in the test's timing on a busy machine
        items = [Candidate(i, "factoid", [p], waits=i == 4) for i, p in enumerate(passages)]
        generate(judge, items, Limits(), side=side)
        asked_after = [r for r in server.log if TEXTS[4] in json.dumps(r.body)]
    assert seen["calls"] >= 1 and seen["answered"] >= 1, seen  # the old rule started it with 4 in flight, 0 answered
    assert items[4].question and asked_after, items[4]


def test_bm25_ranks_computed_while_asking_are_the_ranks_of_the_end(tmp_path):
    """The side thread ranks each question generated while the asking goes on (so the end of the run does not):
    the same ranks the end computes for the same questions and gold passages; a rank kept for another question
    than the item's is not used."""
    import copy
    import time

    from ragexp.testset.generator import Candidate
    from ragexp.testset.passages import Passage
    from ragexp.workflow.generation import _kept_records, _SideWork

    passages = [Passage(f"d{i}#0", f"d{i}", 0, len(t), t) for i, t in enumerate(TEXTS)]
    items = [Candidate(i, "factoid", [p]) for i, p in enumerate(passages)]
    side = _SideWork(passages, passages, items)
    index = side.start().result()
    questions = ["When was the red bridge over the Tamar finished?", "What kept the sheep away from the apple trees?",
                 "What did the foundry in Coalbrookdale cast?", "How many wooden piers did the harbour have?",
                 "Which cities does the tunnel beneath the Alps join?"]
    for c, q in zip(items, questions):
        c.question, c.answer, c.outcome = q, "x", "generated"
    deadline = time.monotonic() + 60
    while len(side.ranks) < len(items) and time.monotonic() < deadline:  # ranked within one of its rounds
        time.sleep(0.05)
    ranked = side.ranked()
    alone = index.ranks(questions, [{p.id} for p in passages])
    assert ranked == {i: (q, r) for i, (q, r) in enumerate(zip(questions, alone))} and alone[0] == 1
    at_end = _kept_records(copy.deepcopy(items), index, 0.8, "m", "none")
    assert _kept_records(copy.deepcopy(items), index, 0.8, "m", "none", ranked) == at_end
    wrong = {**ranked, 0: ("another question", 99)}
    assert _kept_records(copy.deepcopy(items), index, 0.8, "m", "none", wrong) == at_end
    assert [r["bm25_rank"] for r in at_end] == alone
