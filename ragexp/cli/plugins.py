"""Make the Hydra plugins shipped with ragexp (``hydra_plugins/ragexp_ray_launcher``) visible to Hydra.

Hydra finds plugins by listing the directories of the ``hydra_plugins`` namespace package. A
regular install puts ours in site-packages beside the others; an editable install
(``pip install -e .``) serves it through an import hook that such a listing cannot see, so
``hydra/launcher=ray`` would be an "Unknown plugin class". :func:`expose_plugins` adds the
plugin's real directory to the namespace's path (cheap: nothing is imported but the namespace).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def expose_plugins() -> None:
    try:
        spec = importlib.util.find_spec("hydra_plugins.ragexp_ray_launcher")
    except (ImportError, ValueError):
        return
    if spec is None or not spec.submodule_search_locations:
        return
    import hydra_plugins

    where = str(Path(list(spec.submodule_search_locations)[0]).parent)
    if where not in list(hydra_plugins.__path__):
        hydra_plugins.__path__.append(where)
