"""ragexp.common.segmentation gives exactly ``jieba.lcut``'s words: over every Chinese run in the shared data,
the seeds and the demo, and over adversarial texts; jieba's dictionary cache goes to the user's cache folder
(jieba's default temporary folder when that cannot be written), and jieba is imported only for Chinese text."""

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
def data_runs(data_dir) -> list[str]:
    runs = _chinese_runs(data_dir, SEEDS, DEMO)
    assert len(runs) > 5000  # crud_questeval alone holds thousands; fewer means the walk missed files
    return runs


def _differences(texts) -> list[tuple[str, list[str], list[str]]]:
    return [(t, mine, ref) for t in texts if (mine := segmentation.segment(t)) != (ref := jieba.lcut(t))]


def test_every_chinese_run_in_the_data_seeds_and_demo(data_runs):
    assert _differences(data_runs) == []


def test_whole_texts_of_the_data_with_latin_digits_and_punctuation(data_dir):
    # the segmenter also takes any text (jieba's block split): whole fields of the Chinese data files
    texts = [t for f in ("crud_questeval", "memory_eval", "halueval") for p in sorted((data_dir / f).rglob("*.json"))
             for t in _texts(p) if HAN_RUN.search(t)]
    assert len(texts) > 1000
    assert _differences(texts[:3000]) == []


def test_single_characters_and_the_edges_of_each_range(data_runs):
    chars = sorted(set("".join(data_runs)))
    edges = [chr(c) for lo, hi in ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x9FD5, 0x9FD6))
             for c in (lo, lo + 1, hi - 1, hi)]
    assert _differences(chars + edges + ["", "的", "一"]) == []


def test_unknown_words_go_through_the_hmm_as_in_jieba():
    # names, transliterations and coinages outside dict.txt: jieba's HMM groups the single characters
    texts = ["他来到了网易杭研大厦", "小明硕士毕业于中国科学院计算所", "王小明和李华去了北京大学",
             "特朗普与泽连斯基会晤", "我爱吃螺蛳粉和肠粉", "这个模型叫做琪瑶岚翎", "嘿嘿嘿哈哈哈呵呵呵"]
    assert _differences(texts) == []
    # the HMM really ran: at least one of these has a word that dict.txt does not hold
    words = {w for t in texts for w in jieba.lcut(t)}
    assert any(len(w) > 1 and not jieba.dt.FREQ.get(w) for w in words)


def test_long_runs(data_runs):
    joined = "".join(data_runs)[:20_000]
    assert _differences([joined, "的" * 3000, "啊哈" * 1000, "中华人民共和国" * 300]) == []


def test_random_mixes_of_rare_and_common_characters(data_runs):
    rng = random.Random(20261123)
    common = sorted(set("".join(data_runs)))
    rare = [chr(c) for c in (*range(0x3400, 0x4DC0), *range(0x9F00, 0xA000), *range(0xF900, 0xFB00))]
    mixed = common + rare + list("ab CD 12.5% 3.0 +#&._- \r\n\t，。！？abc_def")
    texts = []
    for alphabet in (common, common + rare, mixed):
        texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(1500)]
    assert _differences(texts) == []


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




def test_words_a_program_adds_to_jieba_do_not_change_ragexps():
    before = segmentation.segment("这个模型叫做琪瑶岚翎")
    jieba.add_word("琪瑶岚翎", 5000)
    try:
        assert "琪瑶岚翎" in jieba.lcut("这个模型叫做琪瑶岚翎")
        assert segmentation.segment("这个模型叫做琪瑶岚翎") == before != jieba.lcut("这个模型叫做琪瑶岚翎")
    finally:
        jieba.del_word("琪瑶岚翎")


def _python(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=full_env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


_SEGMENT_AND_REPORT = """
    import json, sys
    from ragexp.common import segmentation
    from ragexp.common.text import keywords
    english = sorted(keywords("retrieval augmented generation"))
    imported_for_english = "jieba" in sys.modules
    texts = json.loads({texts!r})
    print(json.dumps({{"words": [segmentation.segment(t) for t in texts], "english": english,
                      "imported_for_english": imported_for_english,
                      "keywords": sorted(keywords("RAG是一种结合检索和生成的模型架构"))}}))
"""
TEXTS = ["RAG是一种结合检索和生成的模型架构", "他来到了网易杭研大厦", "中华人民共和国", "的"]


@pytest.mark.integration
def test_a_fresh_process_keeps_jiebas_cache_in_the_users_cache_folder(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    for _ in ("writes the cache", "reads it"):
        proc = _python(_SEGMENT_AND_REPORT.format(texts=json.dumps(TEXTS)), env, tmp_path)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
        report = json.loads(proc.stdout)
        assert report["words"] == [jieba.lcut(t) for t in TEXTS]
        assert report["keywords"] == ["rag", "一种", "架构", "检索", "模型", "生成", "结合"]
        assert report["english"] == ["augmented", "generation", "retrieval"]
        assert report["imported_for_english"] is False
    assert [p.name for p in (tmp_path / "xdg" / "ragexp").iterdir()] == [f"jieba-{jieba.__version__}.cache"]
    assert list((tmp_path / "tmp").iterdir()) == []  # no jieba.cache in the temporary folder


@pytest.mark.integration
def test_a_cache_folder_that_cannot_be_made_falls_back_to_jiebas_default_silently(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("the cache dir would have to be inside this file")
    (tmp_path / "tmp").mkdir()
    env = {"XDG_CACHE_HOME": str(blocker / "cache"), "TMPDIR": str(tmp_path / "tmp")}
    proc = _python(_SEGMENT_AND_REPORT.format(texts=json.dumps(TEXTS)), env, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
    assert json.loads(proc.stdout)["words"] == [jieba.lcut(t) for t in TEXTS]
    assert [p.name for p in (tmp_path / "tmp").iterdir()] == ["jieba.cache"]
