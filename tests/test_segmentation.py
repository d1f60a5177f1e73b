"""ragexp.common.segmentation gives exactly ``jieba.lcut``'s words: over every Chinese run in the shared data,
the seeds and the demo, and over adversarial texts; its on-disk index is rebuilt when missing or stale,
survives two processes building it at once, and a cache that cannot be written falls back to jieba."""

from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jieba
import pytest

from ragexp.common import segmentation
from ragexp.common.segmentation import Segmenter, open_index

ROOT = Path(__file__).resolve().parents[1]
SEEDS = Path(os.environ.get("RAGEXP_SEEDS_DIR", ROOT.parent / "shared" / "seeds"))
DEMO = ROOT / "ragexp" / "datasets" / "demo"
HAN_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")  # what ragexp.common.text hands to segment()

jieba.setLogLevel(logging.WARNING)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _texts(path: Path):
    """Every string a file holds: JSON values decoded (so \\u escapes count), parquet cells read."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from _strings(pq.read_table(path).to_pylist())
    elif path.suffix in {".json", ".jsonl"}:
        text = path.read_text("utf-8")
        try:
            yield from _strings(json.loads(text))
        except json.JSONDecodeError:  # JSON lines (halueval's .json files are)
            for line in text.splitlines():
                if line.strip():
                    yield from _strings(json.loads(line))
    elif path.suffix in {".csv", ".txt", ".md", ""}:
        yield path.read_text("utf-8", errors="replace")


def _chinese_runs(*folders: Path) -> list[str]:
    runs: set[str] = set()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                for text in _texts(path):
                    runs.update(HAN_RUN.findall(text))
    return sorted(runs)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xdg_cache") / "ragexp"


@pytest.fixture(scope="module")
def segmenter(cache) -> Segmenter:
    """The index of jieba's own dictionary, built once for this module in a private cache."""
    index = open_index(cache=cache)
    assert index.built and index.path.parent == cache
    return Segmenter(index)


@pytest.fixture(scope="module")
def data_runs(data_dir) -> list[str]:
    runs = _chinese_runs(data_dir, SEEDS, DEMO)
    assert len(runs) > 5000  # crud_questeval alone holds thousands; fewer means the walk missed files
    return runs


def _differences(segmenter: Segmenter, texts) -> list[tuple[str, list[str], list[str]]]:
    return [(t, mine, ref) for t in texts if (mine := segmenter.cut(t)) != (ref := jieba.lcut(t))]


def test_every_chinese_run_in_the_data_seeds_and_demo(segmenter, data_runs):
    assert _differences(segmenter, data_runs) == []


def test_whole_texts_of_the_data_with_latin_digits_and_punctuation(segmenter, data_dir):
    # the segmenter also takes any text (jieba's block split): whole fields of the Chinese data files
    texts = [t for f in ("crud_questeval", "memory_eval", "halueval") for p in sorted((data_dir / f).rglob("*.json"))
             for t in _texts(p) if HAN_RUN.search(t)]
    assert len(texts) > 1000
    assert _differences(segmenter, texts[:3000]) == []


def test_single_characters_and_the_edges_of_each_range(segmenter, data_runs):
    chars = sorted(set("".join(data_runs)))
    edges = [chr(c) for lo, hi in ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x9FD5, 0x9FD6))
             for c in (lo, lo + 1, hi - 1, hi)]
    assert _differences(segmenter, chars + edges + ["", "的", "一"]) == []


def test_unknown_words_go_through_the_hmm_as_in_jieba(segmenter):
    # names, transliterations and coinages outside dict.txt: jieba's HMM groups the single characters
    texts = ["他来到了网易杭研大厦", "小明硕士毕业于中国科学院计算所", "王小明和李华去了北京大学",
             "特朗普与泽连斯基会晤", "我爱吃螺蛳粉和肠粉", "这个模型叫做琪瑶岚翎", "嘿嘿嘿哈哈哈呵呵呵"]
    assert _differences(segmenter, texts) == []
    # the HMM really ran: at least one of these has a word that dict.txt does not hold
    words = {w for t in texts for w in jieba.lcut(t)}
    assert any(len(w) > 1 and not segmenter.index.freq[w] for w in words)


def test_long_runs(segmenter, data_runs):
    joined = "".join(data_runs)[:20_000]
    assert _differences(segmenter, [joined, "的" * 3000, "啊哈" * 1000, "中华人民共和国" * 300]) == []


def test_random_mixes_of_rare_and_common_characters(segmenter, data_runs):
    rng = random.Random(20261123)
    common = sorted(set("".join(data_runs)))
    rare = [chr(c) for c in (*range(0x3400, 0x4DC0), *range(0x9F00, 0xA000), *range(0xF900, 0xFB00))]
    mixed = common + rare + list("ab CD 12.5% 3.0 +#&._- \r\n\t，。！？abc_def")
    texts = []
    for alphabet in (common, common + rare, mixed):
        texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(1500)]
    assert _differences(segmenter, texts) == []


def test_after_many_lookups_the_whole_table_is_read_with_the_same_words(cache, data_runs, monkeypatch):
    # large inputs switch from one query per new fragment to reading every row once; 50 misses here
    monkeypatch.setattr(segmentation, "_READ_ALL_AFTER", 50)
    segmenter = Segmenter(open_index(cache=cache))  # a new Index: its own, empty memo
    assert not segmenter.index.freq.complete
    assert _differences(segmenter, data_runs[:2000]) == []
    freq = segmenter.index.freq
    assert freq.complete  # and it holds jieba's whole prefix dictionary, count for count
    assert all(freq.get(word) == n for word, n in jieba.dt.FREQ.items()) and len(jieba.dt.FREQ) > 490_000
    assert segmenter.index.total == jieba.dt.total
    assert _differences(segmenter, data_runs[2000:4000] + ["他来到了网易杭研大厦"]) == []


def test_threads_and_a_forked_child_share_nothing_broken(cache, data_runs):
    # a metric may run in threads (the judge's workers) and a launcher may fork after a first run
    from concurrent.futures import ThreadPoolExecutor

    segmenter = Segmenter(open_index(cache=cache))
    chunks = [data_runs[i::4][:500] for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        words = list(pool.map(lambda runs: [segmenter.cut(r) for r in runs], chunks))
    assert words == [[jieba.lcut(r) for r in runs] for runs in chunks]
    read, write = os.pipe()
    pid = os.fork()  # the child inherits the open connection and the memo
    if pid == 0:
        try:
            with os.fdopen(write, "w", encoding="utf-8") as out:
                json.dump([segmenter.cut(r) for r in data_runs[-300:]], out)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as child:
        in_child = json.loads(child.read() or "null")
    os.waitpid(pid, 0)
    assert in_child == [jieba.lcut(r) for r in data_runs[-300:]]


def _small_dictionary(path: Path, extra: str = "") -> Path:
    """The first 2,000 entries of jieba's dict.txt (most of a text then goes through the HMM)."""
    lines = (segmentation.jieba_dir() / "dict.txt").read_text("utf-8").splitlines()[:2000]
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def _jieba_with(dictionary: Path, tmp_path: Path) -> jieba.Tokenizer:
    tokenizer = jieba.Tokenizer(str(dictionary))
    tokenizer.tmp_dir = str(tmp_path)  # its marshal cache stays in the test's folder
    return tokenizer


def test_index_rebuilt_when_missing_damaged_or_the_dictionary_changes(tmp_path, data_runs):
    cache = tmp_path / "cache"
    dictionary = _small_dictionary(tmp_path / "dict.txt")
    first = open_index(dictionary, cache)
    assert first.built and [p.name for p in cache.iterdir()] == [first.path.name]
    assert not open_index(dictionary, cache).built  # found, not built again

    first.path.unlink()  # missing
    assert open_index(dictionary, cache).built
    first.path.write_bytes(b"not an index")  # damaged (a half-copied file, a crash in an old version)
    again = open_index(dictionary, cache)
    assert again.built and again.path == first.path and again.total == first.total

    # the dictionary changes (jieba upgraded, a custom dictionary edited): a new key, a new index
    texts = data_runs[:400] + ["他说琪瑶岚翎很好"]
    assert Segmenter(again).cut("他说琪瑶岚翎很好") != ["他", "说", "琪瑶岚翎", "很", "好"]
    _small_dictionary(dictionary, extra="琪瑶岚翎 5000 nr\n")
    changed = open_index(dictionary, cache)
    assert changed.built and changed.path != first.path
    assert Segmenter(changed).cut("他说琪瑶岚翎很好") == ["他", "说", "琪瑶岚翎", "很", "好"]
    reference = _jieba_with(dictionary, tmp_path)
    assert [Segmenter(changed).cut(t) for t in texts] == [reference.lcut(t) for t in texts]


def test_ties_fall_as_in_jieba(tmp_path):
    # every word counted once: 甲乙|丙 and 甲|乙丙 are exactly as probable (log 1 - log total, twice);
    # jieba keeps the longer first word
    dictionary = tmp_path / "ties.txt"
    dictionary.write_text("甲乙 1\n乙丙 1\n甲 1\n乙 1\n丙 1\n", encoding="utf-8")
    segmenter = Segmenter(open_index(dictionary, tmp_path / "cache"))
    reference = _jieba_with(dictionary, tmp_path)
    for text in ("甲乙丙", "甲乙丙甲乙丙", "丙甲乙丙乙"):
        assert segmenter.cut(text) == reference.lcut(text)
    assert segmenter.cut("甲乙丙") == ["甲乙", "丙"]


def test_an_index_built_for_another_dictionary_is_not_used(tmp_path):
    cache = tmp_path / "cache"
    a = open_index(_small_dictionary(tmp_path / "a.txt"), cache)
    b_dict = _small_dictionary(tmp_path / "b.txt", extra="琪瑶岚翎 5000 nr\n")
    b = open_index(b_dict, cache)
    b.path.write_bytes(a.path.read_bytes())  # a file holding another key under b's name
    rebuilt = open_index(b_dict, cache)
    assert rebuilt.built and rebuilt.freq["琪瑶岚翎"] == 5000


def _python(script: str, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    full_env = {**os.environ, **env, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=full_env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


_SEGMENT_AND_REPORT = """
    import json, sys
    from ragexp.common import segmentation
    from ragexp.common.text import keywords
    texts = json.loads({texts!r})
    words = [segmentation.segment(t) for t in texts]
    print(json.dumps({{"words": words, "backend": segmentation.backend(), "jieba": "jieba" in sys.modules,
                      "keywords": sorted(keywords("RAG是一种结合检索和生成的模型架构"))}}))
"""
TEXTS = ["RAG是一种结合检索和生成的模型架构", "他来到了网易杭研大厦", "中华人民共和国", "的"]


def test_a_fresh_process_segments_from_the_index_without_loading_jieba(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    script = _SEGMENT_AND_REPORT.format(texts=json.dumps(TEXTS))
    for attempt in ("builds", "reads"):
        proc = _python(script, env, tmp_path)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        report = json.loads(out)
        assert report["backend"] == "index"
        assert report["words"] == [jieba.lcut(t) for t in TEXTS]
        assert report["keywords"] == ["rag", "一种", "架构", "检索", "模型", "生成", "结合"]
        if attempt == "reads":
            assert report["jieba"] is False  # reading the index never imports jieba, let alone its dictionary
    assert [p.name[:6] + p.suffix for p in (tmp_path / "xdg" / "ragexp").iterdir()] == ["jieba-.sqlite3"]
    assert list((tmp_path / "tmp").iterdir()) == []  # no /tmp/jieba.cache either


def test_two_processes_building_the_index_at_once(tmp_path):
    """Both wait for a go file, then find no index and build it; each renames a whole file into place."""
    go = tmp_path / "go"
    script = f"""
        import json, os, time
        from pathlib import Path
        while not Path({str(go)!r}).exists():
            time.sleep(0.01)
        from ragexp.common.segmentation import Segmenter, open_index
        index = open_index()
        print(json.dumps({{"built": index.built, "words": [Segmenter(index).cut(t) for t in {TEXTS!r}]}}))
    """
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    procs = [_python(script, env, tmp_path) for _ in range(2)]
    go.touch()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out))
    assert [r["built"] for r in reports] == [True, True]  # they really raced
    assert [r["words"] for r in reports] == [[jieba.lcut(t) for t in TEXTS]] * 2
    files = [p.name for p in (tmp_path / "xdg" / "ragexp").iterdir()]
    assert len(files) == 1 and files[0].endswith(".sqlite3")  # one index, no temporary file left
    index = open_index(cache=tmp_path / "xdg" / "ragexp")
    assert not index.built and Segmenter(index).cut(TEXTS[0]) == jieba.lcut(TEXTS[0])


def test_a_cache_that_cannot_be_written_falls_back_to_jieba(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("the cache dir would have to be inside this file")
    env = {"XDG_CACHE_HOME": str(blocker / "cache"), "TMPDIR": str(tmp_path)}
    proc = _python(_SEGMENT_AND_REPORT.format(texts=json.dumps(TEXTS)), env, tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert err == ""  # silently
    report = json.loads(out)
    assert report["backend"] == "jieba" and report["jieba"] is True
    assert report["words"] == [jieba.lcut(t) for t in TEXTS]
    assert report["keywords"] == ["rag", "一种", "架构", "检索", "模型", "生成", "结合"]


def test_a_jieba_version_not_checked_falls_back_to_jieba(tmp_path):
    script = """
        import json, jieba
        jieba.__version__ = "0.99"  # as if jieba had been upgraded past the version this code reproduces
        from ragexp.common import segmentation
        print(json.dumps({"words": segmentation.segment("他来到了网易杭研大厦"), "backend": segmentation.backend()}))
    """
    proc = _python(script, {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "TMPDIR": str(tmp_path)}, tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out) == {"words": jieba.lcut("他来到了网易杭研大厦"), "backend": "jieba"}
    assert not list((tmp_path / "xdg" / "ragexp").glob("*.sqlite3"))
