"""Every dataset adapter on the real files in ``../shared/data`` (and the shipped demo), loaded
through its real config option: counts, a spot-checked record, and an end-to-end run."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from hydra.utils import get_method

from ragexp.common.records import present_fields
from ragexp.workflow.runner import load_dataset, run

CONF = Path(__file__).resolve().parents[1] / "conf"

OPTIONS = sorted(p.stem for p in (CONF / "dataset").glob("*.yaml"))
#: options that need a file from the user (dataset.path=FILE); tested on files made here
NEEDS_PATH = {"records", "mapped", "conversations"}


@pytest.fixture
def load(compose):
    def _load(option: str, *overrides: str):
        return load_dataset(compose(f"dataset={option}", *overrides).dataset)

    return _load


def norm(text: str) -> str:
    return " ".join(text.split())


# --- the config group itself -------------------------------------------------------------

@pytest.mark.parametrize("option", OPTIONS)
def test_yaml_keys_are_the_loader_kwargs(compose, option):
    """conf/dataset/<option>.yaml is the loader's API: same keys, every default a real kwarg."""
    node = compose(f"dataset={option}").dataset
    fn = get_method(node._target_)
    params = inspect.signature(fn).parameters
    kwargs = {n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    if "split" in params:  # **split: the keys of conf/dataset_labelled.yaml, read by ragexp.datasets.split.split_of
        from ragexp.datasets.split import SPLIT_KEYS

        kwargs |= set(SPLIT_KEYS)
    from ragexp.workflow.runner import CORPUS_KEYS  # dataset.corpus=…: read for every adapter by the runner

    assert set(node) - {"_target_", *(set(CORPUS_KEYS) - kwargs)} == kwargs, f"{option}.yaml keys differ from {node._target_}'s parameters"
    assert node.name == option


# --- SQuAD v2 ----------------------------------------------------------------------------

def test_squad2(load):
    ds = load("squad2")
    assert len(ds.records) == 2910  # the answerable questions of PROVENANCE's 6,078
    assert len(ds.corpus) == 646
    first = ds.records[0]
    assert first.query == "In what country is Normandy located?"
    assert first.reference_answers == ["France"]  # four identical annotations, kept once
    assert first.gt_context_ids == ["0-0"]
    assert first.gt_contexts == [ds.corpus["0-0"]]
    assert first.gt_contexts[0].startswith("The Normans (Norman: Nourmands")
    assert first.contexts is None and first.answer is None
    for r in ds.records:  # every gold paragraph is the corpus text of its id, and holds an answer
        assert r.gt_contexts == [ds.corpus[r.gt_context_ids[0]]]
        assert any(a in r.gt_contexts[0] for a in r.reference_answers)


def test_squad2_with_unanswerable(load):
    ds = load("squad2", "dataset.answerable_only=false")
    assert len(ds.records) == 6078
    impossible = [r for r in ds.records if r.extra.get("is_impossible")]
    assert len(impossible) == 3168
    assert all(r.reference_answers is None and r.gt_contexts for r in impossible)


# --- Tonic Validate ----------------------------------------------------------------------

def test_tonic_qa_pairs(load):
    ds = load("tonic_qa_pairs")
    assert len(ds.records) == 55
    assert len(ds.corpus) == 212
    first = ds.records[0]
    assert first.query == "What key components are necessary to create a technology hub according to Paul Graham?"
    assert first.reference_answers == ["The key components to create a technology hub are rich people and nerds."]
    assert first.gt_context_ids == ["siliconvalley.txt"]
    assert first.gt_contexts == ["I think you only need two kinds of people to create a technology hub: rich people and nerds."]
    # PROVENANCE: 51 of the 55 quotes are verbatim in their essay (white space aside)
    assert sum(norm(r.gt_contexts[0]) in norm(ds.corpus[r.gt_context_ids[0]]) for r in ds.records) == 51


def test_tonic_run_lines_up_with_qa_pairs(load):
    run_ds, qa = load("tonic_run"), load("tonic_qa_pairs")
    assert len(run_ds.records) == 55
    assert [r.id for r in run_ds.records] == [r.id for r in qa.records]
    assert [r.gt_contexts for r in run_ds.records] == [r.gt_contexts for r in qa.records]
    first = run_ds.records[0]
    assert first.answer.strip().startswith("Rich people and nerds are the two key components")
    assert first.extra["answer_similarity"] == 5.0
    assert all(r.has("contexts") for r in run_ds.records)  # the titan run kept its contexts
    assert first.contexts[0].startswith("You have to make it succeed.")
    assert set(present_fields(run_ds.records)) == {"id", "query", "contexts", "gt_contexts", "gt_context_ids",
                                                   "answer", "reference_answers"}


def test_tonic_run_without_contexts(load, data_dir):
    ds = load("tonic_run", f"dataset.path={data_dir}/tonic_paul_graham/runs/chatbees_vs_openai_cb_run.csv",
              "dataset.qa_pairs=null")
    assert len(ds.records) == 55
    # llm_context is "[]" in every row: the run did not record its contexts (absent), it did not
    # retrieve nothing (which would score every retrieval metric 0)
    assert all(r.contexts is None for r in ds.records)
    assert "contexts" not in present_fields(ds.records) and "gt_contexts" not in present_fields(ds.records)
    assert ds.records[0].extra["answer_similarity"] == 5.0


# --- continuous-eval ---------------------------------------------------------------------

def test_continuous_eval_retrieval(load):
    ds = load("continuous_eval")
    assert len(ds.records) == 10
    first = ds.records[0]
    assert first.id == "retrieval_sm-1"
    assert first.query == "When was the asteroid named after the first Israeli astronaut for NASA discovered?"
    assert first.reference_answers == ["July 20, 2001"]
    assert len(first.contexts) == 3 and len(first.gt_contexts) == 2
    assert first.gt_contexts[1] in first.contexts  # the asteroid passage was retrieved, third
    assert [len(r.contexts) for r in ds.records] == [3, 4, 4, 4, 3, 3, 2, 3, 3, 3]


def test_continuous_eval_correctness(load):
    ds = load("continuous_eval_correctness")
    assert len(ds.records) == 10
    # correct, correct, correct, incorrect, correct, correct, correct, refuse-to-answer, incorrect, correct
    assert [r.label for r in ds.records] == [True, True, True, False, True, True, True, False, False, True]
    assert ds.records[7].extra["annotation"] == "refuse-to-answer"
    assert ds.records[0].answer == "Justin Timberlake performed at the Super Bowl LII halftime show in 2018."
    assert ds.records[1].reference_answers == ["the soothsayer", "a seer", "a haruspex named Spurinna"]


# --- AutoRAG -----------------------------------------------------------------------------

def test_autorag(load):
    ds = load("autorag")
    assert len(ds.records) == 10
    assert len(ds.corpus) == 30
    first = ds.records[0]
    assert first.id == "1oy5tc"
    assert first.gt_context_ids == ["5b957791-3c7b-4f29-a410-8d005a538855"]
    assert first.gt_contexts == [ds.corpus["5b957791-3c7b-4f29-a410-8d005a538855"]]
    assert first.extra["retrieval_gt"] == [["5b957791-3c7b-4f29-a410-8d005a538855"]]
    assert first.reference_answers[0].startswith("Keep the defense honest")
    assert first.contexts is None


def test_autorag_result_generator(load):
    ds = load("autorag_result")
    assert len(ds.records) == 10 and ds.info["results_matched"] == 10
    first = ds.records[0]
    assert first.context_ids == ["5b957791-3c7b-4f29-a410-8d005a538855", "32207872-dee5-4613-887e-b74fb5c36457",
                                 "aba8293d-2eb9-4a35-8bda-e6c87794c28d", "2b0845e7-8216-48ba-a610-35c801fd5a58",
                                 "5efb3ac8-04f6-4184-94b3-61cbce080e86"]
    assert first.contexts[0] == ds.corpus[first.context_ids[0]]
    assert first.answer.startswith("Question: in football whats the point")  # AutoRAG's test generator echoes its prompt
    assert first.extra["autorag/bleu"] == pytest.approx(0.06336539930376606)


def test_autorag_result_of_a_retrieval_node(load, data_dir):
    ds = load("autorag", f"dataset.result={data_dir}/autorag/result_lexical_retrieval_best_0.parquet")
    first = ds.records[0]
    assert len(first.context_ids) == 10  # retrieved_ids_lexical: the only retrieval in this table
    assert first.context_ids[:5] == ["5b957791-3c7b-4f29-a410-8d005a538855"] * 5
    assert first.answer is None


def test_autorag_korean(load):
    ds = load("autorag_ko")
    assert len(ds.records) == 20 and len(ds.corpus) == 55
    first = ds.records[0]
    assert first.query == "신청자가 사업계획서를 작성할 때 어떤 사항을 반드시 기재해야 합니까?"
    assert len(first.reference_answers) == 2
    assert "공동대표 또는 각자대표로 구성된 창업기업의 경우" in first.gt_contexts[0]


def test_autorag_korean_without_corpus_uses_the_qa_tables_contents(load):
    with_corpus = load("autorag_ko")
    without = load("autorag_ko", "dataset.corpus=null")
    assert without.corpus is None
    assert [r.gt_contexts for r in without.records] == [r.gt_contexts for r in with_corpus.records]


# --- HaluEval, RAGChecker, seed 004 ------------------------------------------------------

def test_halueval(load):
    ds = load("halueval")
    assert len(ds.records) == 1000
    assert sum(r.label for r in ds.records) == 500
    right, wrong = ds.records[0], ds.records[1]
    assert (right.id, wrong.id) == ("1-right", "1-hallucinated")
    assert right.answer == "Arthur's Magazine" and right.label is True
    assert wrong.answer == "First for Women was started first." and wrong.label is False
    assert right.reference_answers == wrong.reference_answers == ["Arthur's Magazine"]
    assert right.contexts == right.gt_contexts and right.contexts[0].startswith("Arthur's Magazine (1844–1846)")


def test_halueval_candidate_as_reference(load):
    ds = load("halueval", "dataset.role=reference")
    wrong = ds.records[1]
    assert wrong.answer == "Arthur's Magazine"  # seed 004's set-up: the answer is right ...
    assert wrong.reference_answers == ["First for Women was started first."]  # ... the reference is not
    assert wrong.label is False


@pytest.mark.parametrize("file", ["checking_inputs.json", "checking_outputs.json"])
def test_ragchecker(load, data_dir, file):
    ds = load("ragchecker", f"dataset.path={data_dir}/ragchecker/{file}")
    assert len(ds.records) == 2
    first = ds.records[0]
    assert first.id == "0" and first.query == "What's the longest river in the world?"
    assert first.context_ids == ["000", "001", "002", "003"]
    assert first.contexts[0].startswith("Scientists debate whether the Amazon or the Nile")
    assert first.answer.startswith("The longest river in the world is the Nile")
    assert first.reference_answers[0].startswith("The Nile is a major north-flowing river")
    assert ("ragchecker_metrics" in first.extra) == (file == "checking_outputs.json")


@pytest.mark.parametrize("option,label", [("memory_eval_true", True), ("memory_eval_false", False)])
def test_memory_eval(load, option, label):
    ds = load(option)
    assert len(ds.records) == 8
    assert all(r.label is label for r in ds.records)
    assert ds.records[0].query == "RAG系统中的embedding模型有什么作用？"
    assert ds.records[0].contexts[0] == "Embedding模型用于将文本转化为向量表示"
    assert all(r.context_sources is None for r in ds.records)  # the files do not say which context came from where


def test_memory_eval_reads_an_items_own_context_sources(tmp_path, data_dir):
    """Seed 004's shape with one label per context (RAG chunk, short- and long-term memory): read as given."""
    from ragexp.datasets.memory_eval import load_memory_eval

    items = json.loads((data_dir / "memory_eval" / "evaluation_samples_true.json").read_text(encoding="utf-8"))[:2]
    items[0]["context_sources"] = ["rag", "rag", "rag", "memory_short", "memory_long", "rag"]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    first, second = load_memory_eval(str(path), label=True).records
    assert first.context_sources == items[0]["context_sources"] and second.context_sources is None


# --- user files: records and mapped --------------------------------------------------------

def test_records(load, tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"id": "a", "query": "q?", "contexts": ["x", "y"], "reference_answers": "x",
                             "latency_s": 1.5, "timings": {"retrieve": 0.5}, "team": "blue"}) + "\n\n"
                 + json.dumps({"query": "second?", "label": "false"}) + "\n", encoding="utf-8")
    ds = load("records", f"dataset.path={f}")
    a, b = ds.records
    assert a.reference_answers == ["x"] and a.timings == {"retrieve": 0.5} and a.extra == {"team": "blue"}
    assert b.id == "3" and b.label is False  # no id: the line number


def test_mapped_csv_with_json_columns(load, data_dir):
    ds = load("mapped", f"dataset.path={data_dir}/tonic_paul_graham/runs/titan_vs_cohere_titan_run.csv",
              "dataset.columns={query: reference_question, answer: llm_answer, contexts: llm_context, "
              "reference_answers: reference_answer}")
    tonic = load("tonic_run")
    assert len(ds.records) == 55
    assert [r.contexts for r in ds.records] == [r.contexts for r in tonic.records]  # JSON text decoded
    # an extra column is kept as written (text): the reader never guesses types
    assert ds.records[0].id == "1" and ds.records[0].extra == {"answer_similarity": "5.0"}


@pytest.mark.parametrize("fmt, sep", [("csv", ","), ("tsv", "\t")])
def test_mapped_table_cells_are_text_as_written(load, tmp_path, fmt, sep):
    """Numbers in text fields stay text ("8", "1889", "007"); "NA", "null", "None", "nan" are answers,
    not missing values; only an empty cell is absent; numeric fields (latency_s, label) are parsed."""
    rows = [["id", "question", "answer", "gold", "latency_s", "label", "note"],
            ["007", "How many legs has a spider?", "8", "8", "0.25", "1", "x"],
            ["2", "When was the Eiffel tower built?", "1889", "1889", "1e-3", "false", "3.50"],
            ["3", "Which continent uses the code NA?", "NA", "NA", "", "", ""],
            ["4", "What does JSON call nothing?", "null", "None", "2", "true", "nan"]]
    f = tmp_path / f"run.{fmt}"
    f.write_text("".join(sep.join(r) + "\n" for r in rows), encoding="utf-8")
    ds = load("mapped", f"dataset.path={f}", "dataset.columns={query: question, reference_answers: gold}")
    a, b, c, d = ds.records
    assert [r.id for r in ds.records] == ["007", "2", "3", "4"]
    assert (a.answer, a.reference_answers, a.latency_s, a.label, a.extra) == ("8", ["8"], 0.25, True, {"note": "x"})
    assert (b.answer, b.reference_answers, b.latency_s, b.label, b.extra) == ("1889", ["1889"], 1e-3, False,
                                                                              {"note": "3.50"})
    assert (c.answer, c.reference_answers, c.latency_s, c.label, c.extra) == ("NA", ["NA"], None, None, {"note": None})
    assert (d.answer, d.reference_answers, d.extra) == ("null", ["None"], {"note": "nan"})


def test_mapped_csv_cell_larger_than_the_csv_modules_default_cap(load, tmp_path):
    passage = "word " * 60_000   # 300 KB in one cell, over the csv module's 128 KB default
    f = tmp_path / "run.csv"
    f.write_text(f'question,retrieved\nq1,"{json.dumps([passage]).replace(chr(34), chr(34) * 2)}"\n', encoding="utf-8")
    ds = load("mapped", f"dataset.path={f}", "dataset.columns={query: question, contexts: retrieved}")
    assert ds.records[0].contexts == [passage]


def test_mapped_csv_bad_latency_text_names_row_and_column(load, tmp_path):
    from ragexp.errors import DataError

    f = tmp_path / "run.csv"
    f.write_text("question,secs\nq1,0.5\nq2,fast\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load("mapped", f"dataset.path={f}", "dataset.columns={query: question, latency_s: secs}")
    assert str(e.value) == (f"{f}, row 2, field 'latency_s' (column 'secs'): expected a finite, non-negative number "
                            "of seconds, got str 'fast'")


@pytest.mark.parametrize("option, name", [("records", "r.jsonl"), ("mapped", "r.jsonl"), ("mapped", "r.csv"),
                                          ("mapped", "r.json")])
def test_utf8_bom_is_accepted(load, tmp_path, option, name):
    f = tmp_path / name
    if name.endswith(".csv"):
        text = "query,answer\nWhat is RAG?,retrieval\n"
    elif name.endswith(".jsonl"):
        text = json.dumps({"query": "What is RAG?", "answer": "retrieval"}) + "\n"
    else:
        text = json.dumps([{"query": "What is RAG?", "answer": "retrieval"}])
    f.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))   # what Windows Notepad and Excel write
    ds = load(option, f"dataset.path={f}")
    assert [(r.query, r.answer) for r in ds.records] == [("What is RAG?", "retrieval")]


def test_mapped_parquet(load, data_dir):
    ds = load("mapped", f"dataset.path={data_dir}/autorag/sample_qa.parquet",
              "dataset.columns={id: qid, reference_answers: generation_gt}")
    autorag = load("autorag")
    assert [(r.id, r.query, r.reference_answers) for r in ds.records] == \
        [(r.id, r.query, r.reference_answers) for r in autorag.records]
    assert ds.records[0].extra["retrieval_gt"] == [["5b957791-3c7b-4f29-a410-8d005a538855"]]


def test_mapped_jsonl(load, data_dir):
    ds = load("mapped", f"dataset.path={data_dir}/continuous_eval/retrieval_sm.jsonl",
              "dataset.columns={query: question, contexts: retrieved_contexts, gt_contexts: ground_truth_contexts, "
              "reference_answers: ground_truths}", "dataset.limit=4")
    ce = load("continuous_eval")
    assert len(ds.records) == 4
    assert [r.contexts for r in ds.records] == [r.contexts for r in ce.records[:4]]
    assert [r.gt_contexts for r in ds.records] == [r.gt_contexts for r in ce.records[:4]]


# --- the demo ------------------------------------------------------------------------------

def test_demo(load):
    strong, weak = load("demo"), load("demo", "dataset.system=weak")
    assert len(strong.records) == len(weak.records) == 50
    assert len(strong.corpus) == 47
    assert sum(not r.label for r in strong.records) == 5
    chinese = [r for r in strong.records if r.extra["lang"] == "zh"]
    assert len(chinese) == 6
    for ds in (strong, weak):
        assert set(present_fields(ds.records)) == {"id", "query", "contexts", "context_ids", "gt_contexts",
                                                   "gt_context_ids", "answer", "reference_answers", "label",
                                                   "latency_s", "timings"}
        for r in ds.records:
            assert r.contexts == [ds.corpus[i] for i in r.context_ids]
            assert r.gt_contexts == [ds.corpus[i] for i in r.gt_context_ids]
            assert r.latency_s >= sum(r.timings.values())

    def top1(ds):
        return sum(r.context_ids[0] in r.gt_context_ids for r in ds.records)

    assert top1(strong) >= 45 and top1(weak) <= 20  # visibly different retrieval
    assert all("rerank" in r.timings for r in strong.records)
    assert not any("rerank" in r.timings for r in weak.records)


def test_demo_questions_only(load):
    ds = load("demo", "dataset.system=null")
    assert len(ds.records) == 50
    assert not any(r.has("answer") or r.has("contexts") for r in ds.records)
    assert ds.records[0].gt_context_ids == ["bee-01"]


def test_demo_ships_inside_the_package():
    import ragexp.datasets.demo as demo

    folder = Path(demo.__file__).parent
    assert sorted(p.name for p in folder.glob("*.jsonl")) == ["corpus.jsonl", "questions.jsonl", "strong.jsonl",
                                                               "weak.jsonl"]


# --- end to end: every option through run() ----------------------------------------------

def _e2e_overrides(option: str, tmp_path: Path, data_dir: Path) -> list[str]:
    if option == "records":
        f = tmp_path / "r.jsonl"
        f.write_text(json.dumps({"query": "q", "answer": "a b", "reference_answers": ["a b c"],
                                 "contexts": ["a b"]}) + "\n", encoding="utf-8")
        return [f"dataset.path={f}"]
    if option == "locomo":  # questions about conversations: a memory layer retrieves, the answers are recorded (none)
        return ["memory_layer=turns", "retriever=bm25", "metric=locomo"]
    if option == "conversations":  # ragexp's JSONL, one conversation a line (docs/datasets.md, "Conversations")
        f = tmp_path / "c.jsonl"
        f.write_text(json.dumps({"id": "c1", "sessions": [
            {"time": "2024-03-01T10:00", "turns": [{"id": "a1", "speaker": "Ann", "text": "I moved to Oslo."},
                                                   {"id": "a2", "speaker": "Bo", "text": "Nice!"}]}],
            "questions": [{"question": "Where does Ann live?", "answer": "Oslo", "evidence": ["a1"], "category": 4,
                           "prediction": "In Oslo", "prediction_context": ["a1"]}]}) + "\n", encoding="utf-8")
        return [f"dataset.path={f}", "metric=locomo"]
    if option == "mapped":
        return [f"dataset.path={data_dir}/continuous_eval/correctness_sm.jsonl",
                "dataset.columns={query: question, reference_answers: ground_truths}"]
    if option in ("squad2", "tonic_qa_pairs", "autorag", "autorag_ko"):
        return ["retriever=bm25", "generator=extractive"]  # questions and corpus only: a pipeline answers them
    if option == "mlflow_traces":  # two traces of an app (a root span and a retriever), written here
        import mlflow
        from mlflow.entities.trace_location import MlflowExperimentLocation

        uri = f"sqlite:///{tmp_path / 'app.db'}"
        where = MlflowExperimentLocation(mlflow.MlflowClient(uri).create_experiment("app"))
        before = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
        mlflow.set_tracking_uri(uri)
        try:
            for q in ("What do bees make?", "Who keeps bees?"):
                with mlflow.start_span("app", span_type="CHAIN", trace_destination=where) as root:
                    root.set_inputs({"question": q})
                    with mlflow.start_span("search", span_type="RETRIEVER") as span:
                        span.set_outputs([{"page_content": "Bees make honey; beekeepers keep them.", "id": "d1"}])
                    root.set_outputs("Honey.")
            mlflow.flush_trace_async_logging()
        finally:
            mlflow.set_tracking_uri(before)
        return ["dataset.experiment=app", f"dataset.tracking_uri={uri}"]
    return []


@pytest.mark.parametrize("option", OPTIONS)
def test_every_option_runs_end_to_end(compose, data_dir, tmp_path, option):
    cfg = compose(f"dataset={option}", "dataset.limit=12", "tracking.enabled=false",
                  *_e2e_overrides(option, tmp_path, data_dir))
    summary = run(cfg)
    assert summary["dataset"] == option
    assert 0 < summary["n_samples"] <= 12
    assert any(v is not None for v in summary["metrics"].values()), summary


def test_every_option_is_covered():
    assert NEEDS_PATH <= set(OPTIONS)
    assert {"demo", "squad2", "tonic_qa_pairs", "tonic_run", "continuous_eval", "continuous_eval_correctness",
            "autorag", "autorag_result", "autorag_ko", "halueval", "ragchecker", "memory_eval_true",
            "memory_eval_false", "records", "mapped", "expertqa", "mlflow_traces", "locomo",
            "conversations"} == set(OPTIONS)


def test_common_column_names_are_read_and_said_and_a_missing_question_names_the_columns(tmp_path, capsys):
    """Issue 42 item 3: a CSV with question/response/contexts/ground_truth columns (Ragas' names) is read without
    dataset.columns, in one line; one with no question column says which columns it has and how to map one;
    a CSV given to dataset=records points to dataset=mapped."""
    import pandas as pd

    import ragexp
    from ragexp.datasets.mapped import load_mapped
    from ragexp.datasets.records import load_records
    from ragexp.errors import DataError

    csv = tmp_path / "my_run.csv"
    pd.DataFrame({"question": ["What is tea?", "What is coffee?"], "response": ["Tea is a drink.", "A bean drink."],
                  "contexts": ['["Tea is brewed from leaves."]', '["Coffee is brewed from beans."]'],
                  "ground_truth": ["A drink", "A drink"]}).to_csv(csv, index=False)
    ds = load_mapped(str(csv))
    assert [r.query for r in ds.records] == ["What is tea?", "What is coffee?"]
    assert ds.records[0].answer == "Tea is a drink." and ds.records[1].reference_answers == ["A drink"]
    assert ds.records[0].contexts == ["Tea is brewed from leaves."]
    said = [line for line in capsys.readouterr().err.splitlines() if "common names" in line]
    assert said == [f"[ragexp] {csv}: read columns 'question' as query, 'response' as answer, 'ground_truth' as "
                    "reference_answers (their common names; dataset.columns maps any other)"]
    rows = [{"input": "What is tea?", "output": "Tea is a drink.", "expected_output": "A drink"}]
    result = ragexp.evaluate(rows, metric="answer_token_f1", log=False)  # DeepEval's names, through the API
    assert result.summary["n_samples"] == 1 and result.summary["metrics"]["answer_token_f1"] == pytest.approx(
        2 * (1 / 3) * 1 / (1 / 3 + 1))  # SQuAD tokens (articles dropped): tea is drink vs drink: P 1/3, R 1
    other = tmp_path / "other.csv"
    other.write_text("q,a\nx,y\n")
    with pytest.raises(DataError) as e:
        load_mapped(str(other))
    assert "no column gives the question: the columns are q, a; name it with dataset.columns={query: <column>}" \
        in str(e.value)
    with pytest.raises(DataError) as e:
        load_records(str(csv))
    assert "(a .csv file: dataset=mapped reads it, its columns named by dataset.columns)" in str(e.value)


def test_a_column_read_as_no_field_is_named_before_a_metric_asks_for_the_field(tmp_path, capsys):
    """The README's CSV (question,response,truth) without dataset.columns: question and response are read by their
    common names, and 'truth' is said to be read as no field (a metric then missing reference_answers named only
    the fields the dataset has, not the column holding them: H8's walkthrough)."""
    from ragexp.datasets.mapped import load_mapped

    csv = tmp_path / "my_run.csv"
    csv.write_text("question,response,truth\nCapital of France?,Lyon,Paris\nLargest planet?,Jupiter,Jupiter\n")
    ds = load_mapped(str(csv))
    assert ds.records[0].reference_answers is None and ds.records[0].extra == {"truth": "Paris"}
    said = [line for line in capsys.readouterr().err.splitlines() if "no record field" in line]
    assert said == [f"[ragexp] {csv}: column 'truth' is no record field (docs/records.md): kept as each record's "
                    "extra data, scored by no metric; dataset.columns={<field>: <column>} reads a column as a field"]
    ds = load_mapped(str(csv), columns={"reference_answers": "truth"})  # mapped: read, and nothing to say
    assert ds.records[0].reference_answers == ["Paris"]
    assert "no record field" not in capsys.readouterr().err


def test_a_records_row_with_a_question_key_points_to_dataset_mapped(tmp_path):
    """dataset=records over a JSONL whose rows say 'question' (Ragas'/DeepEval's names): one line naming the key and
    dataset=mapped, which reads it (it said "field 'query': expected a non-empty string … got NoneType None")."""
    from ragexp.datasets.mapped import load_mapped
    from ragexp.datasets.records import load_records
    from ragexp.errors import DataError

    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "Capital of France?", "answer": "Paris"}\n{"question": "Largest planet?", "answer": "Jupiter"}\n')
    with pytest.raises(DataError) as e:
        load_records(str(path))
    assert str(e.value) == (f"{path}, row 2, field 'query': no 'query' key, but a 'question' key: dataset=mapped reads "
                            "the common names of the fields (question, response, ground_truth…; docs/datasets.md), or "
                            "rename the key to query")
    path.write_text('{"question": "Largest planet?", "answer": "Jupiter"}\n')
    assert [r.query for r in load_mapped(str(path)).records] == ["Largest planet?"]


def test_a_pandas_written_csv_of_lists_is_read(tmp_path):
    """pandas' to_csv writes a list cell as Python writes it (['a', "b's"]), as Ragas' exports do: read as the list."""
    import pandas as pd

    from ragexp.datasets.mapped import load_mapped

    csv = tmp_path / "ragas_export.csv"
    pd.DataFrame({"question": ["What is tea?"], "response": ["A drink."],
                  "retrieved_contexts": [["Tea is a drink.", "It's brewed from leaves."]]}).to_csv(csv, index=False)
    assert "\"['Tea is a drink.', " in csv.read_text()  # Python's repr of the list, not JSON
    (record,) = load_mapped(str(csv)).records
    assert record.contexts == ["Tea is a drink.", "It's brewed from leaves."]


def test_conversations_scored_without_the_locomo_suite_say_which_suite_scores_them(compose, capsys):
    cfg = compose("dataset=locomo", "dataset.limit=5", "memory_layer=turns", "retriever=bm25", "tracking.enabled=false")
    run(cfg)
    assert "questions about conversations are scored LoCoMo's way by metric=locomo" in capsys.readouterr().err
    run(compose("dataset=locomo", "dataset.limit=5", "memory_layer=turns", "retriever=bm25", "metric=locomo",
                "tracking.enabled=false"))
    assert "scored LoCoMo's way" not in capsys.readouterr().err
