"""One path for every run, read from the source (issue 39): a run in memory and a streamed run take the same
steps (ragexp/workflow/steps.py) and reduce their scores with the one aggregator (ragexp/core/tally.py).

What these checks find, each tested on a probe that has it: a module handed to another as an object
(``sys.modules[__name__]``) and read there through its attributes (``runner._hydra_paths()``,
``hasattr(runner, "provenance")``) — a dependency the import graph of tests/test_layers.py cannot see; a
private name of one ragexp module used from another; a step, a check or a message of the run written
twice; a default restated in Python beside its one place in ``conf/``; the load rule or the fork pool set up
twice; a function over 80 lines.
"""

from __future__ import annotations

import ast
import re

import pytest
import yaml

from test_layers import MODULES, PACKAGE, TREES

CONF = PACKAGE.parent / "conf"


def _ragexp_modules(tree: ast.Module) -> dict[str, str]:
    """Local name → the module of ragexp it stands for (``from ragexp.workflow import runner``, ``import
    ragexp.x as y``), wherever the import stands."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ragexp"):
            for a in node.names:
                if f"{node.module}.{a.name}" in MODULES:
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            out.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
    return out


def _is_module_object(node: ast.AST) -> bool:
    """``sys.modules[...]``: a module taken as an object."""
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
        and node.value.attr == "modules" and isinstance(node.value.value, ast.Name) and node.value.value.id == "sys"


def hidden_ties(module: str, source: str | None = None) -> list[str]:
    """Where ``module`` ties itself to another module of ragexp past the import graph: hands a module over as an
    object (``sys.modules[__name__]`` as an argument), reads a parameter's private attribute
    (``runner._hydra_paths()``), asks whether a module has an attribute (``hasattr(runner, "x")``), or uses a
    private name of another ragexp module (``from ragexp.x import _y``, ``x._y``)."""
    tree = TREES[module] if source is None else ast.parse(source)
    modules = _ragexp_modules(tree)
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = []
    for node in ast.walk(tree):
        where = f"{module}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if _is_module_object(arg):
                    found.append(f"{where}: hands a module over as an object (sys.modules[...])")
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id == "hasattr" and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in modules:
                found.append(f"{where}: hasattr() on the module {modules[node.args[0].id]}")
        if isinstance(node, ast.FunctionDef):
            params = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]}
            for inner in ast.walk(node):
                if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) \
                        and inner.value.id in params - {"self", "cls"} and inner.attr in PRIVATE_FUNCTIONS \
                        and inner.attr not in own:
                    found.append(f"{module}:{inner.lineno}: calls {inner.value.id}.{inner.attr}, a private function "
                                 f"of {PRIVATE_FUNCTIONS[inner.attr]} passed in as an object")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and _private(node.attr) and modules[node.value.id] != module:
            found.append(f"{where}: uses {modules[node.value.id]}.{node.attr}, a private name of another module")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ragexp") and node.module != module:
            found += [f"{where}: imports {node.module}.{a.name}, a private name of another module"
                      for a in node.names if _private(a.name)]
    return sorted(set(found))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


#: the private functions of ragexp's modules: ``x._f`` on a parameter x is a module passed in and read
PRIVATE_FUNCTIONS = {n.name: m for m, tree in TREES.items() for n in tree.body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(n.name)}


def test_no_module_is_passed_around_or_read_through_its_private_names():
    found = [line for module in MODULES for line in hidden_ties(module)]
    assert not found, "ties between modules the import graph cannot see (import what you need instead):\n" \
        + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("import sys\nfrom ragexp.workflow import streaming\n\ndef f():\n"
     "    streaming.execute(runner=sys.modules[__name__])", 1),
    ("def execute(cfg, runner):\n    return runner._hydra_paths()", int("_hydra_paths" in PRIVATE_FUNCTIONS)),
    ("def execute(cfg, runner):\n    return runner._hydra()", 1),  # a private function of ragexp.workflow.steps
    ("from ragexp.workflow import runner\n\ndef f():\n    return hasattr(runner, 'provenance')", 1),
    ("from ragexp.workflow import runner\n\ndef f():\n    return runner._hydra_paths()", 1),
    ("from ragexp.workflow.runner import _hydra_paths", 1),
    ("from ragexp.workflow import steps\n\ndef f():\n    return steps.results_folder()", 0),
    ("class A:\n    def f(self):\n        return self._x", 0),
])
def test_a_hidden_tie_is_found(source, found):
    assert len(hidden_ties("ragexp.workflow.probe", source)) == found


# --- each step of a run in one place ------------------------------------------------------------------------

#: The run's aggregating steps and the steps both paths of a run take: each defined once in ragexp/.
ONCE = ("aggregate", "stage_latencies", "uncertainty", "trust", "metrics_step", "labels_step", "aggregate_step",
        "uncertainty_step", "trust_step", "summary_step", "save_step", "print_step", "judge_failed_step", "log_step",
        "traces_step", "check_store_step", "processes_for", "fork_pool")
#: What a step says, written once (a second copy is a second step of its own)
SAID_ONCE = ("no metric configured",  # the check that a metric is configured
             "Each sample's reason is in",  # the judge-failed check
             "status/{")  # the status counts
#: What a run's step calls, from one place in the run (ragexp/workflow/, ragexp/api.py): the one save, the
#: label-key check, the judge-failed check, the traces step
CALLED_ONCE_IN_RUN = ("check_label_keys", "save_results", "log_streamed_traces", "log_run_traces", "failed_line",
                      "judge_trust")
#: Called from one place in ragexp/: the load rule and the pool of forked processes
CALLED_ONCE = ("getloadavg", "get_context", "ProcessPoolExecutor")


def definitions(trees: dict[str, ast.Module]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ONCE:
                out.setdefault(node.name, []).append(f"{module}:{node.lineno}")
    return out


def restated(texts: dict[str, str]) -> list[str]:
    """What :data:`ONCE` and :data:`SAID_ONCE` find more than once in ``texts`` (module → source)."""
    lines = [f"{name} is defined {len(where)} times: {', '.join(where)}"
             for name, where in definitions({m: ast.parse(t) for m, t in texts.items()}).items() if len(where) > 1]
    for text in SAID_ONCE:
        where = [m for m, t in texts.items() for _ in range(t.count(text))]
        if len(where) > 1:
            lines.append(f"{text!r} is written {len(where)} times: {', '.join(where)}")
    calls: dict[str, list[str]] = {}
    for m, t in texts.items():
        for node in ast.walk(ast.parse(t)):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name in CALLED_ONCE or name in CALLED_ONCE_IN_RUN and m.startswith(("ragexp.workflow", "ragexp.api")):
                    calls.setdefault(name, []).append(f"{m}:{node.lineno}")
    lines += [f"{name}() is called from {len(where)} places: {', '.join(where)}"
              for name, where in calls.items() if len(where) > 1]
    return lines


SOURCES = {m: p.read_text(encoding="utf-8") for m, p in MODULES.items()}


def test_each_step_of_a_run_is_written_once():
    found = restated(SOURCES)
    assert not found, "a step of the run written twice (one path: ragexp/workflow/steps.py, ragexp/core/tally.py):\n" \
        + "\n".join(found)


def test_a_restated_step_is_found():
    """The old second runner, in small: its own aggregate and judge-failed message beside the runner's."""
    second = ("def aggregate(self):\n    pass\n\ndef f(failed, where, folder, results):\n"
              "    save_results(folder, results)\n"
              "    raise ValueError(f\"{failed}. Each sample's reason is in {where}\")\n")
    texts = {**SOURCES, "ragexp.workflow.probe": second}
    assert len(restated(texts)) == 3
    assert restated({"a": "def aggregate():\n    pass\n"}) == []


# --- each default in conf/ only -----------------------------------------------------------------------------

def _conf_keys() -> dict[str, set[str]]:
    out = {}
    for path in sorted(CONF.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            out[str(path.relative_to(CONF))] = {str(k) for k in data if k != "defaults"}
    return out


CONF_KEYS = _conf_keys()


def restating(module: str, source: str | None = None) -> list[str]:
    """Module-level dicts written in Python whose keys are three or more keys of one config file: a default
    restated beside its one place (``DEFAULTS = {"mode": "auto", "chunk_records": 2000, ...}``)."""
    tree = TREES[module] if source is None else ast.parse(source)
    found = []
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict):
            keys = {k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            for conf, known in CONF_KEYS.items():
                if len(keys & known) >= 3:
                    found.append(f"{module}:{node.lineno}: restates conf/{conf} ({', '.join(sorted(keys & known))})")
    return found


def test_each_default_has_one_place_in_conf():
    found = [line for module in MODULES for line in restating(module)]
    found += [f"{m}: {hit.group(0)}" for m, text in SOURCES.items()
              for hit in re.finditer(r"\.get\(\"table_rows\", \d+\)", text)]
    assert not found, "defaults restated in Python (read them with ragexp.common.paths.conf_file):\n" + "\n".join(found)


def test_a_restated_default_is_found():
    old = ('DEFAULTS = {"mode": "auto", "chunk_records": 2000, "processes": None, "stream_from_mb": 64, '
           '"address": "local", "in_flight": None}')
    assert len(restating("ragexp.workflow.probe", old)) >= 1
    assert restating("ragexp.workflow.probe", 'NAMES = {"a": 1, "b": 2, "c": 3}') == []


# --- short functions ----------------------------------------------------------------------------------------

def long_functions(trees: dict[str, ast.Module], most: int = 80) -> list[str]:
    return [f"{m}:{n.lineno}: {n.name} is {n.end_lineno - n.lineno + 1} lines" for m, tree in trees.items()
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > most]


def test_no_function_over_80_lines():
    found = long_functions(TREES)
    assert not found, "functions over 80 lines (split them into named steps):\n" + "\n".join(found)


def test_a_long_function_is_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(79))  # with the def line: 80
    assert len(long_functions({"probe": ast.parse(f"def f():\n{body}\n    return 0\n")})) == 1
    assert long_functions({"probe": ast.parse(f"def f():\n{body}\n")}) == []
