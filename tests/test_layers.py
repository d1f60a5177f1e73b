"""The package's architecture, read from its source: layers import downward only, no import cycles,
no module sharing its name with a public function, no module writing to another's globals, no
private name of another package outside ``ragexp/_compat.py``.

Every ``import`` statement of every module under ``ragexp/`` counts, the ones inside functions and
under ``TYPE_CHECKING`` included: an import deferred for start-up time still ties the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragexp

PACKAGE = Path(ragexp.__file__).parent

#: Each top-level part of ``ragexp`` and its layer; a module imports only from its own layer or lower.
#: Layer 1 is ordered inside: the judge scores metrics (metrics never import it: it is passed in), the
#: datasets and the pipeline may use the judge's client and the matchers.
LAYERS = {
    "errors": 0, "_compat": 0, "common": 0, "version": 0,
    "stats": 1.0, "matchers": 1.0, "metrics": 1.1, "judge": 1.2, "datasets": 1.3, "pipeline": 1.3,
    "results": 1.5, "offline": 1.5,
    "core": 2, "testset": 2,
    "report": 3,
    "tracking": 4,
    "workflow": 5,
    "cli": 6, "api": 6, "__main__": 6, "compare": 6, "ui": 6, "standin_judge": 6, "generate": 6, "judge_candidates": 6,
    # a module placed apart from its package: the judge's own exceptions import nothing, and the judged
    # metrics' reply readers (a layer below the judge) raise its ParseError
    "judge.errors": 0,
}


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
TREES = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()}


def _static_names(tree: ast.Module) -> set[str]:
    """Names a module binds when it is imported (not the ones a module ``__getattr__`` serves later)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


ROOT_NAMES = _static_names(TREES["ragexp"])


def layer(module: str) -> float:
    """The layer of a module of ragexp (``ragexp`` itself: the top, it serves the library API)."""
    parts = module.split(".")
    if len(parts) == 1:
        return max(LAYERS.values())
    for n in range(len(parts), 1, -1):  # the longest entry: judge.errors before judge
        if ".".join(parts[1:n]) in LAYERS:
            return LAYERS[".".join(parts[1:n])]
    raise AssertionError(f"{module}: ragexp.{parts[1]} has no layer; place it in LAYERS of {__file__}")


def imports(module: str, source: str | None = None) -> list[tuple[int, str, str]]:
    """(line, the module of ragexp imported, the statement) for every import of ``module`` (or of
    ``source`` read as that module), wherever it stands."""
    path = MODULES.get(module)
    is_package = path is not None and path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    text = path.read_text(encoding="utf-8") if source is None else source
    tree, lines = (TREES[module] if source is None else ast.parse(source)), text.splitlines()
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in MODULES:
                    targets.append(sub)  # from ragexp.core import pairing: the submodule
                elif base == "ragexp" and a.name not in ROOT_NAMES:
                    targets.append("ragexp.api")  # served by ragexp.__getattr__ from ragexp.api
                elif base == "ragexp":
                    targets.append("ragexp.errors")  # ragexp's own names: the errors
                else:
                    targets.append(base)
        for target in targets:
            if target == "ragexp" or target.startswith("ragexp."):
                found.append((node.lineno, target, lines[node.lineno - 1].strip()))
    return found


def test_every_module_is_read():
    assert {"ragexp.core.pairing", "ragexp.tracking.runs", "ragexp.report.comparison", "ragexp.cli.compare",
            "ragexp.common.http", "ragexp.api"} <= set(MODULES)
    assert len(MODULES) > 80
    # the reader sees an import inside a function: api.py imports the runner only when evaluate() runs
    assert any(t == "ragexp.workflow.runner" for _, t, _ in imports("ragexp.api"))


def upward(module: str, source: str | None = None) -> list[str]:
    """One line per import of ``module`` from a higher layer: where it stands and what it imports."""
    where = "/".join(module.split(".")) + (".py" if MODULES.get(module) is None or MODULES[module].name != "__init__.py"
                                           else "/__init__.py")
    here = layer(module)
    return [f"{where}:{line}: {text}  (layer {here:g} imports {target}, layer {layer(target):g})"
            for line, target, text in imports(module, source) if layer(target) > here]


def test_layers_import_downward_only():
    found = [line for module in MODULES for line in upward(module)]
    assert not found, "imports up the layers (pass an object or a callable in instead):\n" + "\n".join(found)


def test_an_upward_import_is_named_with_its_line():
    """The check above finds an import hidden in a function, and names the file, the line and the statement."""
    source = "import json\n\n\ndef cache_root():\n    from ragexp.tracking.store import launch_dir\n"
    assert upward("ragexp.pipeline.probe", source) == [
        "ragexp/pipeline/probe.py:5: from ragexp.tracking.store import launch_dir  "
        "(layer 1.3 imports ragexp.tracking.store, layer 4)"]
    assert upward("ragexp.judge.probe", "from ragexp.metrics.base import Score") == []  # downward
    assert upward("ragexp.metrics.probe", "from ragexp.judge import build_judge") != []  # metrics < judge


def test_importing_ragexp_imports_only_layer_0():
    """``import ragexp`` is cheap and pulls no layer in: at module level it imports the errors and nothing else."""
    top = {n.lineno for n in TREES["ragexp"].body if isinstance(n, (ast.Import, ast.ImportFrom))}
    others = [n.lineno for n in TREES["ragexp"].body if isinstance(n, ast.Import) or isinstance(n, ast.ImportFrom)
              and not (n.module or "").startswith(("ragexp", "__future__"))]
    assert not others, f"ragexp/__init__.py imports another package at lines {others}"
    assert {t for line, t, _ in imports("ragexp") if line in top} <= {"ragexp.errors", "ragexp.version"}


def test_no_import_cycles():
    """No two modules import each other, directly or round a loop (a package's own ``__init__``, which
    Python imports first anyway, is not an edge)."""
    edges = {m: {t for _, t, _ in imports(m) if t in MODULES and t != m and not m.startswith(t + ".")}
             for m in MODULES}
    cycles, index, low, stack, on, counter = [], {}, {}, [], set(), [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in MODULES:
        if v not in index:
            visit(v)
    detail = ["; ".join(f"{m} imports {', '.join(sorted(edges[m] & set(c)))}" for m in c) for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(detail)


def test_no_module_shares_its_name_with_a_public_function():
    """``x.py`` defines no public ``x``, and no package binds a public name that is one of its modules:
    ``ragexp.x.y`` always means the same thing."""
    clashes = []
    for module, tree in TREES.items():
        path, leaf = MODULES[module], module.rpartition(".")[2]
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == leaf \
                    and path.name != "__init__.py":
                clashes.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.name} in module {module}")
        if path.name == "__init__.py":
            shadowed = {n for n in _static_names(tree) if not n.startswith("_") and f"{module}.{n}" in MODULES}
            for n in sorted(shadowed):
                clashes.append(f"{path.relative_to(PACKAGE.parent)}: binds {n}, which is also the module {module}.{n}")
    assert not clashes, "a module and a public name share a name:\n" + "\n".join(clashes)


_MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "remove", "discard", "clear"}


def _mutable_globals(tree: ast.Module) -> set[str]:
    """Module-level names bound to a list, dict or set."""
    found = set()
    for node in tree.body:
        targets, value = ((node.targets, node.value) if isinstance(node, ast.Assign) else
                          ([node.target], node.value) if isinstance(node, ast.AnnAssign) else ([], None))
        if isinstance(value, (ast.List, ast.Dict, ast.Set)) or (isinstance(value, ast.Call) and isinstance(
                value.func, ast.Name) and value.func.id in ("list", "dict", "set", "defaultdict")):
            found.update(t.id for t in targets if isinstance(t, ast.Name))
    return found


MUTABLE = {module: _mutable_globals(tree) for module, tree in TREES.items()}


def messages(module: str, source: str | None = None) -> list[str]:
    """Where ``module`` writes to another module's state: assigns an attribute of a module of ragexp
    (``log.STOPPED = True``), or changes a list, dict or set another module holds at module level."""
    tree = TREES[module] if source is None else ast.parse(source)
    modules, names = {}, {}  # local name -> module of ragexp; local name -> (module, its global)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ragexp"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in MODULES:
                    modules[a.asname or a.name] = full
                elif a.name in MUTABLE.get(node.module, ()):
                    names[a.asname or a.name] = full
        elif isinstance(node, ast.Import):
            modules.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in modules:
                found.append(f"{module}:{node.lineno}: sets {modules[t.value.id]}.{t.attr}")
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in names:
                found.append(f"{module}:{node.lineno}: sets an item of {names[t.value.id]}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            held = node.func.value
            if isinstance(held, ast.Name) and held.id in names:
                found.append(f"{module}:{node.lineno}: {node.func.attr}() on {names[held.id]}")
            if isinstance(held, ast.Attribute) and isinstance(held.value, ast.Name) and held.value.id in modules \
                    and held.attr in MUTABLE.get(modules[held.value.id], ()):
                found.append(f"{module}:{node.lineno}: {node.func.attr}() on {modules[held.value.id]}.{held.attr}")
    return found


def test_no_module_level_state_carries_messages_between_modules():
    """A module returns a value or takes an object; it does not leave a flag in another module's globals."""
    found = [line for module in MODULES for line in messages(module)]
    assert not found, "module-level state written from another module:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "from ragexp.tracking import log\n\ndef stop():\n    log.STOPPED = True",
    "from ragexp.metrics import base\n\ndef forget():\n    base.REGISTRY.clear()",
    "from ragexp.metrics.base import REGISTRY\n\ndef forget():\n    REGISTRY.clear()",
    "from ragexp.metrics.base import REGISTRY\nREGISTRY['x'] = 1",
])
def test_a_message_through_module_state_is_found(source):
    assert len(messages("ragexp.report.probe", source)) == 1


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def private_names(module: str, source: str | None = None) -> list[str]:
    """Where ``module`` uses a private name of another package: imports a module or a name whose path has a
    part with one leading underscore (``hydra._internal``, ``_TOKENIZERS``), or reads one off an imported
    module (``litellm._client``). The standard library is not counted (``os._exit`` is documented)."""
    import sys

    tree = TREES[module] if source is None else ast.parse(source)
    outside = {}  # local name -> the other package's module or name it stands for
    found = []
    for node in ast.walk(tree):
        pairs = ([(a.name, a.asname or a.name.split(".")[0]) for a in node.names] if isinstance(node, ast.Import)
                 else [(f"{node.module}.{a.name}", a.asname or a.name) for a in node.names]
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for full, local in pairs:
            if full.split(".")[0] in ("ragexp", "__future__") or full.split(".")[0] in sys.stdlib_module_names:
                continue
            outside[local] = full
            if _private(full):
                found.append(f"{module}:{node.lineno}: imports {full}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in outside:
                found.append(f"{module}:{node.lineno}: reads {outside[base.id]}...{node.attr}")
    return found


def test_private_names_of_other_packages_only_in_compat():
    """What another package does not promise lives in ragexp/_compat.py, with the versions it was tested on."""
    found = [line for module in MODULES if module != "ragexp._compat" for line in private_names(module)]
    assert not found, "private names of other packages outside ragexp/_compat.py:\n" + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("from sacrebleu.metrics.bleu import _TOKENIZERS", 1),
    ("from hydra._internal.config_loader_impl import ConfigLoaderImpl", 1),
    ("def f():\n    import litellm\n    return litellm._client_session", 1),
    ("import os\nos._exit(0)", 0),
    ("from sacrebleu.metrics.bleu import BLEU\nBLEU.TOKENIZERS", 0),
])
def test_a_private_name_is_found(source, found):
    assert len(private_names("ragexp.metrics.probe", source)) == found


@pytest.mark.parametrize("source, expected", [
    ("from ragexp.tracking.store import launch_dir", ["ragexp.tracking.store"]),
    ("def f():\n    from ragexp.core import pairing", ["ragexp.core.pairing"]),
    ("from ragexp import __version__", ["ragexp.errors"]),
    ("from ragexp import evaluate", ["ragexp.api"]),
    ("import json, ragexp.report.plots", ["ragexp.report.plots"]),
    ("from ..judge import client", ["ragexp.judge.client"]),
    ("from .base import register", ["ragexp.metrics.base"]),
])
def test_the_reader_resolves_each_kind_of_import(source, expected):
    """The checks above would pass on a reader that misses imports: it is tested on each kind."""
    assert [t for _, t, _ in imports("ragexp.metrics.probe", source)] == expected


# --- core/ computes; others speak ------------------------------------------------------------------------

#: calls that write a file or make a folder (``open`` in a writing mode is checked apart)
_WRITES = {"write_text", "write_bytes", "to_parquet", "to_csv", "to_json", "write_table", "mkdir", "makedirs",
           "dump", "savefig", "rename", "replace", "unlink", "rmtree", "copyfile", "copy2", "move"}


def speaking(module: str, source: str | None = None) -> list[str]:
    """Where ``module`` writes a file, prints a sentence (``print``, a rich console, ``sys.stdout``/``stderr``),
    reads ``sys.argv`` or sets the exit status (``sys.exit``, ``os._exit``, ``raise SystemExit``/``GateFailed``):
    what only the runner, ``tracking/``, ``report/`` and ``cli/`` do."""
    tree = TREES[module] if source is None else ast.parse(source)
    found = []
    for node in ast.walk(tree):
        where = f"{module}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if name == "print":
                found.append(f"{where}: prints")
            elif name == "open" and any(isinstance(a, ast.Constant) and isinstance(a.value, str) and set(a.value) & set("wax")
                                        for a in [*node.args[1:2], *[k.value for k in node.keywords if k.arg == "mode"]]):
                found.append(f"{where}: opens a file for writing")
            elif name in _WRITES and isinstance(fn, ast.Attribute) and not (name == "replace" and node.args
                                                                             and len(node.args) == 2):
                found.append(f"{where}: writes ({name})")
            elif name == "write" and isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Attribute) \
                    and fn.value.attr in ("stdout", "stderr"):
                found.append(f"{where}: writes to sys.{fn.value.attr}")
            elif name in ("exit", "_exit", "quit"):
                found.append(f"{where}: exits ({name})")
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if getattr(raised, "id", getattr(raised, "attr", "")) in ("SystemExit", "GateFailed"):
                found.append(f"{where}: sets the exit status (raises {getattr(raised, 'id', getattr(raised, 'attr', ''))})")
        if isinstance(node, ast.Attribute) and node.attr == "argv":
            found.append(f"{where}: reads sys.argv")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "rich" or n.startswith("rich.") for n in names):
                found.append(f"{where}: imports rich (a console)")
    return found


#: core modules still being moved out of core (issue 31); a new file here needs its reason written next to it.
#: (core/results.py's Parquet writing, core/labels.py's sentences and core/gate.py's file, argv and exit
#: status have left already: they are checked.)
STILL_MOVING: set[str] = set()


def test_core_computes_and_others_speak():
    """``core/`` neither writes files, nor prints or builds console sentences, nor reads ``sys.argv`` or exits."""
    found = [line for module in MODULES if module.startswith("ragexp.core.") and module not in STILL_MOVING
             for line in speaking(module)]
    assert not found, "core/ speaks (files to tracking/ or the runner, sentences to report/, argv to cli/):\n" \
        + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("def save(path, table):\n    table.to_parquet(path)", 1),
    ("from pathlib import Path\nPath('x').write_text('y')", 1),
    ("def f():\n    with open('x', 'w') as fh:\n        pass", 1),
    ("def f():\n    with open('x') as fh:\n        return fh.read()", 0),
    ("print('3 metrics')", 1),
    ("import sys\nsys.stderr.write('no')", 1),
    ("from rich.console import Console", 1),
    ("import sys\ndef f():\n    return sys.argv[1:]", 1),
    ("def f(s):\n    return s.replace('a', 'b')", 0),
    ("import sys\ndef f():\n    sys.exit(2)", 1),
    ("import os\ndef f():\n    os._exit(1)", 1),
    ("def f():\n    raise SystemExit(1)", 1),
    ("from ragexp import errors\ndef f():\n    raise errors.GateFailed()", 1),
    ("from ragexp.errors import ConfigError\ndef f():\n    raise ConfigError('x')", 0),
])
def test_a_speaking_line_is_found(source, found):
    assert len(speaking("ragexp.core.probe", source)) == found


def private_imports(module: str, source: str | None = None) -> list[str]:
    """Where ``module`` imports a private name (one leading underscore) of another module of ragexp."""
    tree = TREES[module] if source is None else ast.parse(source)
    lines = {line for line, target, _ in imports(module, source) if target != module}
    return [f"{module}:{node.lineno}: imports {node.module}.{a.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.lineno in lines for a in node.names if _private(a.name)]


def test_no_private_name_is_imported_across_modules():
    """A name with a leading underscore is its module's own: another module asks for a public one."""
    found = [line for module in MODULES for line in private_imports(module)]
    assert not found, "private names imported from another module of ragexp:\n" + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("from ragexp.stats.intervals import _draws", 1),
    ("def f():\n    from ragexp.metrics.base import _BY_FUNCTION", 1),
    ("from ragexp.metrics.base import Score, register", 0),
    ("from ragexp.metrics import base\nbase.Score", 0),
])
def test_a_private_import_is_found(source, found):
    assert len(private_imports("ragexp.report.probe", source)) == found


# --- exceptions: one public tree, the judge's own apart ------------------------------------------------

#: the exceptions that end ``python -m ragexp`` with an exit status of their own (docs/errors.md, "Exit status")
EXIT_CODES = {"GateFailed": 1, "Interrupted": 130, "Terminated": 143}
#: where exceptions are defined: the public tree, and the judge's control flow
ERROR_MODULES = {"ragexp.errors", "ragexp.judge.errors"}


def exception_classes(module: str, source: str | None = None) -> list[tuple[int, str]]:
    """(line, name) of every class of ``module`` (or of ``source``) that derives from an exception: a base
    named like a built-in exception or like an exception class of ragexp's error modules."""
    import builtins

    known = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    for m in sorted(ERROR_MODULES):
        known |= {node.name for node in ast.walk(TREES[m]) if isinstance(node, ast.ClassDef)}
    tree = TREES[module] if source is None else ast.parse(source)
    return [(node.lineno, node.name) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
            and any(getattr(b, "id", getattr(b, "attr", None)) in known for b in node.bases)]


def test_exceptions_are_defined_in_the_error_modules():
    """An exception is ``ragexp/errors.py``'s (the public tree), ``ragexp/judge/errors.py``'s (the judge's
    control flow), or private to the one module that raises and catches it (``_AppFailed``; no other module
    may import a private name): a newcomer finds every exception another module sees in two files."""
    found = [f"{module}:{line}: class {name}" for module in MODULES if module not in ERROR_MODULES
             for line, name in exception_classes(module) if not name.startswith("_")]
    assert not found, "exceptions defined outside ragexp/errors.py and ragexp/judge/errors.py:\n" + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("class Oops(ValueError):\n    pass", 1),
    ("from ragexp.errors import DataError\nclass RowError(DataError):\n    pass", 1),
    ("from ragexp.judge import errors\nclass Late(errors.CallFailed):\n    pass", 1),
    ("class Plain:\n    pass", 0),
])
def test_an_exception_class_is_found(source, found):
    assert len(exception_classes("ragexp.report.probe", source)) == found


def internal_exports(names: list[str], namespace: dict) -> list[str]:
    """The exceptions among ``names`` (of ``namespace``) that are not ragexp's public tree: neither a
    ``RagexpError``, nor an exit-status exception, nor a warning, or defined elsewhere than ragexp/errors.py."""
    from ragexp import errors

    bad = []
    for n in names:
        value = namespace.get(n)
        if not (isinstance(value, type) and issubclass(value, BaseException)):
            continue
        public = issubclass(value, (errors.RagexpError, Warning)) or n in EXIT_CODES
        if not public or value.__module__ != "ragexp.errors":
            bad.append(f"{n} ({value.__module__})")
    return bad


def test_no_internal_exception_in_all():
    """``ragexp.__all__`` holds the ``RagexpError`` tree and the exit-status exceptions (and the warning), not the
    judge's control flow; ``ragexp/__init__.py`` does not reach into the judge for names."""
    namespace = {n: getattr(ragexp, n) for n in ragexp.__all__}
    assert internal_exports(ragexp.__all__, namespace) == []
    assert {n for n in EXIT_CODES if n in ragexp.__all__} == set(EXIT_CODES)
    assert {"RagexpError", "ConfigError", "DataError", "FieldsError", "JudgeFailed"} <= set(ragexp.__all__)
    assert not [t for _, t, _ in imports("ragexp") if t.startswith("ragexp.judge")]


def test_an_internal_export_is_found():
    from ragexp.judge import errors as judge_errors

    names = ["DataError", "CallFailed", "ParseError", "GateFailed", "evaluate", "KeyError"]
    namespace = {"DataError": ragexp.DataError, "CallFailed": judge_errors.CallFailed,
                 "ParseError": judge_errors.ParseError, "GateFailed": ragexp.GateFailed, "evaluate": len,
                 "KeyError": KeyError}
    assert internal_exports(names, namespace) == ["CallFailed (ragexp.judge.errors)", "ParseError (ragexp.judge.errors)",
                                                  "KeyError (builtins)"]


# --- folders say what is where ---------------------------------------------------------------------------

#: packages that serve HTTP (a server of ragexp's own, not a client or a launched ``mlflow`` process)
_SERVERS = ("http.server", "socketserver", "wsgiref", "aiohttp.web", "uvicorn", "fastapi", "flask", "starlette")


def servers(module: str, source: str | None = None) -> list[str]:
    """Where ``module`` holds an HTTP server: imports a server package or defines a server or request handler."""
    tree = TREES[module] if source is None else ast.parse(source)
    found = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found += [f"{module}:{node.lineno}: imports {n}" for n in names
                  if any(n == s or n.startswith(s + ".") for s in _SERVERS)]
        if isinstance(node, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", "")).endswith(
                ("HTTPServer", "RequestHandler", "TCPServer")) for b in node.bases):
            found.append(f"{module}:{node.lineno}: class {node.name} serves HTTP")
    return found


def test_no_http_server_under_cli():
    """``ragexp/cli/`` holds command lines only: a server (the stand-in judge) lives in ``ragexp/offline/``."""
    found = [line for module in MODULES if module.startswith("ragexp.cli.") for line in servers(module)]
    assert not found, "an HTTP server under ragexp/cli/ (offline helpers go to ragexp/offline/):\n" + "\n".join(found)
    assert servers("ragexp.offline.standin_judge")  # the check sees the one server ragexp has


@pytest.mark.parametrize("source, found", [
    ("from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer", 1),
    ("import socketserver", 1),
    ("import http.server\nclass H(http.server.BaseHTTPRequestHandler):\n    pass", 2),
    ("import urllib.request\nimport http.client", 0),
])
def test_a_server_is_found(source, found):
    assert len(servers("ragexp.cli.probe", source)) == found


# --- no function over 80 lines -----------------------------------------------------------------------------

MAX_LINES = 80
#: functions allowed over MAX_LINES (module path → function names), each with its reason: none since the runner's
#: unification (issue 39) split streaming.execute, api.evaluate and log.save_results.
STILL_LONG: dict[str, set[str]] = {}


def long_functions(module: str, source: str | None = None, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method of ``module`` longer than ``limit`` lines, from its ``def``
    line to its last (docstring and comments included, decorators not)."""
    tree = TREES[module] if source is None else ast.parse(source)
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit]


def _path(module: str) -> str:
    return str(MODULES[module].relative_to(PACKAGE.parent))


def test_no_function_over_80_lines():
    """A function a reader takes in at once: none in ``ragexp/`` is over 80 lines (STILL_LONG apart)."""
    found = [f"{_path(m)}: {name} has {n} lines" for m in MODULES for name, n in long_functions(m)
             if name not in STILL_LONG.get(_path(m), ())]
    assert not found, f"functions over {MAX_LINES} lines (split them):\n" + "\n".join(found)


def test_a_long_function_is_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    assert long_functions("ragexp.report.probe", f"def f():\n{body}\n") == [("f", 81)]
    assert long_functions("ragexp.report.probe", f"class C:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n") \
        == [("m", 81)]
    assert long_functions("ragexp.report.probe", "def f():\n" + "\n".join(body.splitlines()[:79]) + "\n") == []
