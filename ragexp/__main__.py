"""``python -m ragexp``: compose the config, run the evaluation, print one line on a user error."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from .confdir import conf_dir
from .errors import RagexpError


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def _app(cfg: DictConfig) -> float | None:
    from .runner import run

    try:
        summary = run(cfg)
    except RagexpError as exc:
        print(f"ragexp: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, no traceback
        said = f": {exc}" if str(exc) else ""
        print(f"ragexp: interrupted{said}. No finished MLflow run was logged.", file=sys.stderr)
        sys.exit(130)
    return summary.get("objective")


def main() -> None:
    _app()


if __name__ == "__main__":
    main()
