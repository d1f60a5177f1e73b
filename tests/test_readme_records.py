"""The README is the front door: it defines the record format itself, and nothing a user reads
points to a spec the repository does not hold."""

from __future__ import annotations

import re

from cli import ROOT

from ragexp.common.records import FIELDS


def _records_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^## Records: the format of your own data\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "README has no 'Records' section"
    return m.group(1)


def test_readme_defines_every_record_field_with_a_type_and_meaning():
    section = _records_section()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|$", section, re.M)}
    assert sorted(rows) == sorted(FIELDS)
    assert "**required**" in rows["query"]


def test_readme_says_what_absent_empty_and_undefined_mean():
    section = _records_section()
    for words in ("absent", "present but empty", "missing_field", "undefined", '"contexts": []', '"answer": ""'):
        assert words in section, words


def test_no_user_facing_text_points_to_the_spec():
    user_facing = [ROOT / "README.md", *sorted((ROOT / "conf").rglob("*.yaml"))]
    offenders = [str(p.relative_to(ROOT)) for p in user_facing if "SPEC §" in p.read_text(encoding="utf-8")]
    assert offenders == []
