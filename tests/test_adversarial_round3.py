"""Hidden variants of issue 33's cases, the quickest ones of benchmarks/adversarial.py (each a real process of a
second or two): inputs that are not files, ids that would drive a terminal, configs that explode three other
ways, a foreign SQLite store whose table is called ``runs``. The whole set, with the judge, store and namespace
variants, is ``python benchmarks/adversarial.py`` (it prints the tally)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import adversarial  # noqa: E402

QUICK = ["unix_socket_as_dataset", "dev_urandom_as_dataset", "fifo_as_corpus", "fifo_yaml_in_config_dir",
         "id_carriage_return", "id_bidi_override", "id_osc_title", "id_c1_csi", "bomb_merge_keys",
         "bomb_mapping_levels", "bomb_interpolations", "foreign_sqlite_with_a_runs_table"]
BY_NAME = {c.name: c for c in adversarial.CASES}


def test_the_quick_list_names_existing_variants():
    assert set(QUICK) <= set(BY_NAME)


@pytest.mark.integration
@pytest.mark.parametrize("name", QUICK)
def test_hidden_variant_holds(name, tmp_path):
    BY_NAME[name].fn(tmp_path)  # raises adversarial.Failed, saying why, when the variant is not held
