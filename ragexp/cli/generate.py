"""``python -m ragexp.generate corpus.path=docs.jsonl n=200 judge=gpt4o_mini out=testset.jsonl``: a test set
from the user's corpus (:mod:`ragexp.workflow.generation`; docs/testset.md). A user error is one line, exit 2."""

from __future__ import annotations

import gc
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from ragexp.cli import run_app
from ragexp.common.paths import conf_dir
from ragexp.errors import RagexpError


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="generate")
def _app(cfg: DictConfig) -> None:
    from ragexp.common.secrets import scrub
    from ragexp.workflow.generation import run_generation

    try:
        run_generation(OmegaConf.to_container(cfg, resolve=True), progress=bool(cfg.get("progress", True)))
        # the process ends next: the interpreter's last collections then skip what exists (litellm's 380,000
        # objects), which cost about 1 s of CPU between the last line and the exit (docs/performance.md)
        gc.freeze()
    except RagexpError as exc:
        from ragexp.common.files import exit_status

        print(f"ragexp.generate: error: {scrub(str(exc))}", file=sys.stderr)
        sys.exit(exit_status(exc))  # 4: an output could not be written (docs/errors.md)
    except KeyboardInterrupt:
        print("ragexp.generate: interrupted; every reply received is in the judge cache: the same command asks "
              "only for the rest", file=sys.stderr)
        sys.exit(130)


def main() -> None:
    run_app(_app)
