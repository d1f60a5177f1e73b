"""The README is a front door and the docs/ site holds the rest: the record format is defined on
its page, the metrics reference covers the whole registry, every page is in the site's nav, and
nothing a user reads points to a spec the repository does not hold. (The README's Python API
example runs as a doctest in tests/test_api.py; `mkdocs build --strict` runs in .ci/run.)"""

from __future__ import annotations

import importlib.util
import re

import yaml
from cli import ROOT

from ragexp.common.records import FIELDS, HUMAN_SCALES
from ragexp.metrics.base import load_all

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def _hook():
    spec = importlib.util.spec_from_file_location("metrics_reference", DOCS / "_hooks" / "metrics_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for item in node for p in _nav_pages(item)]


def test_readme_is_a_front_door_without_history_or_timings():
    assert len(README.splitlines()) <= 200
    for section in ("## Install", "## The main command", "## Recipes", "## Python API", "## Tests", "## Documentation"):
        assert section in README, section
    assert not re.search(r"\bwas \d", README), "history ('was 2.3 s') belongs nowhere; figures go to docs/performance.md"
    timings = re.findall(r"\b\d+(?:\.\d+)? ?(?:s|ms|seconds)\b", README)
    assert timings == [], f"timings belong in docs/performance.md: {timings}"


def test_every_page_the_readme_links_exists_and_every_page_is_in_the_site_nav():
    linked = set(re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]+)?\)", README))
    assert {p for p in linked if not (ROOT / p).exists()} == set()
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    nav = set(_nav_pages(config["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.glob("*.md")}
    assert nav == pages
    assert {f"docs/{p}" for p in pages} <= linked, "the README's index lists every page"


def test_records_page_defines_every_field_with_a_type_and_meaning():
    text = (DOCS / "records.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|$", text, re.M)}
    assert set(rows) == set(FIELDS)
    assert "**required**" in rows["query"]
    human = text[text.index("## Human labels"):text.index("## Absent")]
    # a labelled key with no metric (ExpertQA's correctness) has its row; a judge metric's scale is in its reference
    assert [k for k in set(HUMAN_SCALES) - set(load_all()) if f"`{k}`" not in human] == []
    reference = _hook().reference()
    for info in (i for i in load_all().values() if i.judge):
        section = reference[reference.index(f"### `{info.name}`"):]
        assert f"**people's labels** (`human.{info.name}`" in section.split("\n### ")[0], info.name
    for words in ("absent", "present but empty", "missing_field", "undefined", '"contexts": []', '"answer": ""'):
        assert words in text, words


def test_metrics_reference_has_a_section_for_every_registered_metric_and_suite():
    text = _hook().reference()
    sections = re.findall(r"^### `(\w+)`$", text, re.M)
    assert sorted(sections) == sorted(load_all())
    suites = {p.stem for p in (ROOT / "conf" / "metric").glob("*.yaml")  # its defaults name metrics (a base: /name@)
              if set(re.findall(r"^  - (\w+)", p.read_text(encoding="utf-8"), re.M)) - {"_self_"}}
    assert suites and all(f"| `{s}` |" in text for s in suites)
    assert "```pycon\n>>> " in text, "the worked examples are shown as code"


def test_no_user_facing_text_points_to_the_spec():
    user_facing = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((ROOT / "conf").rglob("*.yaml"))]
    offenders = [str(p.relative_to(ROOT)) for p in user_facing if "SPEC §" in p.read_text(encoding="utf-8")]
    assert offenders == []


def _slug(heading: str) -> str:
    """Python-Markdown's toc slug, which MkDocs gives every heading: what a `#anchor` link must name."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_every_anchor_the_code_and_the_docs_cite_names_a_heading_and_no_page_cites_the_spec():
    generated = _hook().reference()
    assert "SPEC §" not in generated
    anchors = {}
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8") + (generated if page.name == "metrics.md" else "")
        anchors[f"docs/{page.name}"] = {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}
    sources = [*ROOT.glob("ragexp/**/*.py"), *ROOT.glob("conf/**/*.yaml"), ROOT / "README.md", *DOCS.glob("*.md")]
    cited = {(str(p.relative_to(ROOT)), m.group(1), m.group(2)) for p in sources
             for m in re.finditer(r"(docs/[\w-]+\.md)#([\w-]+)", p.read_text(encoding="utf-8"))}
    cited |= {(f"docs/{p.name}", f"docs/{m.group(1)}", m.group(2)) for p in DOCS.glob("*.md")
              for m in re.finditer(r"\]\(([\w-]+\.md)#([\w-]+)\)", p.read_text(encoding="utf-8"))}
    assert cited, "the check found no citation at all"
    broken = sorted((where, f"{page}#{anchor}") for where, page, anchor in cited if anchor not in anchors.get(page, ()))
    assert broken == []


def test_errors_page_lists_every_exception_a_user_can_cause():
    import ragexp.errors as errors

    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    raised = [name for name, obj in vars(errors).items()
              if isinstance(obj, type) and issubclass(obj, errors.RagexpError) and obj is not errors.RagexpError]
    assert len(raised) >= 7
    assert [name for name in raised if f"| `{name}` |" not in text] == []


def test_the_counts_the_docs_give_of_the_shared_datasets_are_the_datas(data_dir):
    """A sentence stating how many claims, questions or conversations a shared dataset holds says what the data
    holds (the README once said ExpertQA had '~200 questions': 974 claims of 204 questions)."""
    from ragexp.datasets.expertqa import load_expertqa
    from ragexp.datasets.locomo import load_locomo

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    datasets = (ROOT / "docs" / "datasets.md").read_text(encoding="utf-8")
    path = str(data_dir / "expertqa" / "domain_val.jsonl")
    for require, claims in ((True, load_expertqa(path).records), (False, load_expertqa(path, require_evidence=False).records)):
        questions = len({r.extra["question_id"] for r in claims})
        if require:
            assert f"ExpertQA: {len(claims)} claims of {questions} questions" in readme
            assert f"keeps the {len(claims)} claims that have evidence text" in " ".join(datasets.split())
        else:
            assert f"`false` keeps all {len(claims):,}" in " ".join(datasets.split())
    first = load_expertqa(path, limit=200).records
    trust = " ".join((ROOT / "docs" / "judge-trust.md").read_text(encoding="utf-8").split())
    assert f"the first 200 claims (those of the first {len({r.extra['question_id'] for r in first})} questions'" in trust
    locomo = load_locomo(str(data_dir / "locomo" / "locomo10.json"))
    turns = sum(len(list(c.turns())) for c in locomo.conversations.values())
    said = f"{len(locomo.conversations)} conversations, {turns:,} turns, {len(locomo.records):,} questions"
    assert said in " ".join(datasets.split()), said
