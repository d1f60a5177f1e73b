"""Every shell command of the docs pages runs as written, from an empty folder, with the installed package
(tests/doc_commands.py, shared with tests/test_readme_commands.py), or is left out here for a stated reason:
an install step, a real model, a server that runs until stopped, a checkout's benchmarks, a service this
suite tests elsewhere (named), or the same command run as written by the README's test or an earlier page.

Each page's commands run in one bash script in the page's order (a compare finds its sweep), with the page's
own files made by the page's own ``printf`` lines; the judge recipes start ``python -m ragexp.standin_judge``
as the page says. The docs' quick start is docs/index.md ("The first run"), checked first."""

from __future__ import annotations

import functools
import re

import pytest

from cli import ROOT
from doc_commands import blocks, commands, failures, port_taken, run_script

DOCS = ROOT / "docs"
QUICKSTART = "index.md"
PAGES = [QUICKSTART] + sorted(p.name for p in DOCS.glob("*.md") if p.name != QUICKSTART)

#: pages whose every command another test runs as written
COVERED = {
    "judge-trust.md": "tests/test_judge_trust_docs.py runs every command of this page",
    "testset.md": "tests/test_generate.py runs this page's quick start as written",
}
#: (pattern, why a command that matches is not run here)
NOT_HERE = [
    (r"^(pip |python3? -m venv )", "an install step: the test runs the installed package"),
    (r"^python -m pytest", "the test suite itself"),
    (r"^(\S+=\S+ )?python (benchmarks|experiments)/|^git worktree |^cd experiments/|^python log_traces\.py",
     "needs a checkout's benchmarks/ or experiments/, which the installed package does not hold"),
    (r"judge=(gpt4o|gpt4o_mini|claude_sonnet)\b|hosted_vllm/|generator=llm",
     "needs a real model: a paid API key or a model server of your own"),
    (r"^python -m ragexp\.ui\b", "starts MLflow's UI, which runs until stopped: tests/test_ui.py and "
                                 "tests/test_ui_browser.py start it"),
    (r"^initdb |mlflow server |tracking=server", "needs PostgreSQL and an MLflow server: "
                                                 "tests/test_server_postgres.py"),
    (r"hydra/launcher=(ray|submitit_local)", "starts Ray or Slurm-style job processes: tests/test_launchers.py"),
    (r"\+experiment=retriever_sweep", "a sweep of many jobs over SQuAD: minutes, too long for this test"),
    (r"-m dataset=locomo .*memory_layer=\S+,", "a sweep of 9 jobs over LoCoMo's 1,986 questions: minutes, too long for "
                                             "this test; benchmarks/bench_memory_layer.py runs it"),
    (r"memory_layer\.factory=llama_memory:", "imports experiments/memory_layer's example (a checkout's): "
                                             "tests/test_memory_layers.py runs a custom memory layer"),
    (r"\+experiment=optuna_bm25", "Optuna's trials over SQuAD: tests/test_pipeline_sweep.py runs it with 3 trials"),
    (r"^python -m ragexp\.tracking\.upload ", "uploads a results folder whose logging failed: "
                                              "tests/test_tracking_failures.py and tests/test_results_folder.py"),
    (r"dataset\.experiment=langchain-app|pipeline\.factory=rag_app:", "reads experiments/langchain_app's traces or "
     "app (a checkout's): tests/test_traced_apps.py runs both with a real LangChain chain"),
]
#: commands that read what an earlier command of the page left: the earlier one is run on the page itself
DEPENDENT = re.compile(r"^python -m ragexp\.(compare|judge_candidates)\b")


def _readme_commands() -> list[str]:
    return [c for b in blocks((ROOT / "README.md").read_text(encoding="utf-8")) for c in commands(b)]


@functools.lru_cache(maxsize=None)
def plan(page: str) -> tuple[tuple[str, str | None], ...]:
    """The page's commands, each with why it is not run here (None: it runs)."""
    seen = {_bare(c): "README.md" for c in _readme_commands()}
    for earlier in PAGES[:PAGES.index(page)]:
        if earlier not in COVERED:
            for cmd, why in plan(earlier):
                seen.setdefault(_bare(cmd), earlier) if why is None else None
    cmds = [c for b in blocks((DOCS / page).read_text(encoding="utf-8")) for c in commands(b)]
    out = []
    for n, cmd in enumerate(cmds):
        why = COVERED.get(page) or next((w for pattern, w in NOT_HERE if re.search(pattern, _bare(cmd))), None)
        # a repeat is run once (CI time), except on the quick start, with a judge, or before a compare of its runs
        if (why is None and _bare(cmd) in seen and page != QUICKSTART and cmd.startswith("python -m ragexp ")
                and "judge" not in cmd
                and not any(DEPENDENT.match(c) for c in cmds[n + 1:])):
            why = f"the same command runs as written in the test of {seen[_bare(cmd)]}"
        out.append((cmd, why))
    return tuple(out)


def _bare(cmd: str) -> str:
    """A command without its trailing comment (``python -m ragexp   # the demo``)."""
    return re.sub(r"\s+#\s.*$", "", cmd)


def test_every_docs_command_is_run_here_or_left_out_for_a_stated_reason():
    planned = {page: plan(page) for page in PAGES}
    run = [(page, cmd) for page, rows in planned.items() for cmd, why in rows if why is None]
    assert ("index.md", "python -m ragexp") in run, "the docs' quick start: the first run"
    assert len(run) >= 25, run
    assert [c for _, c in run if re.search(r"<[a-z_ ]+>", c)] == [], "a placeholder cannot be run as written"
    assert not [c for _, c in run if "tests/" in c], "a wheel user has no tests/ folder"
    for page, rows in planned.items():  # a page that starts the stand-in judge on :8000 also stops it
        cmds = [c for c, why in rows if why is None]
        if any("standin_judge" in c for c in cmds):
            assert any(c.startswith("kill ") for c in cmds), page


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if any(why is None for _, why in plan(p))])
def test_a_docs_page_runs_as_written_from_an_empty_folder(page, tmp_path, data_dir):
    cmds = [cmd for cmd, why in plan(page) if why is None]
    if any(":8000" in c for c in cmds) and port_taken(8000):
        pytest.skip("the page's judge recipes use port 8000, which something else holds here")
    proc, exits = run_script(cmds, tmp_path, data_dir)
    bad = failures(cmds, proc, exits)
    assert not bad, "\n".join(bad)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
