"""MkDocs hook: the reference part of docs/metrics.md, written at build time from the code.

The page holds the marker ``<!-- metric-reference -->``; this hook replaces it with one section
per metric module — the module docstring (the definitions and their worked examples), then each
registered metric: the record fields it reads, its options with the defaults and comments of
``conf/metric/<name>.yaml``, its range and direction, and its own docstring — plus the table
of suites read from ``conf/metric/``. Renaming, adding or removing a metric changes the page
on the next build; the page cannot describe a metric the registry does not hold.
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

MARKER = "<!-- metric-reference -->"
ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf" / "metric"
#: The families in the order a reader meets them (retrieval, then answers, then the judge metrics of
#: ``ragexp/metrics/judged/``, one module each, in the order of their conf/metric/judge.yaml suite).
ORDER = ("token", "context", "ranking", "answer", "keyword", "similarity", "relevance", "usage", "relevant_usage",
         "main_points", "full_support", "questeval", "overall")


def md(text: str) -> str:
    """A docstring (reStructuredText habits) as Markdown: inline code, roles, literal and doctest blocks."""
    text = re.sub(r":(?:mod|func|class|meth|attr|data):`~?([^`]+)`", r"`\1`", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        literal = out and out[-1].rstrip().endswith("::") and not stripped
        if stripped.startswith(">>>") or (literal and i + 1 < len(lines)):
            if literal:
                out[-1] = out[-1].rstrip()[:-1]  # "::" introduces a literal block: keep one colon
                i += 1
                indent = len(lines[i]) - len(lines[i].lstrip())
            block = []
            while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) >= indent:
                block.append(lines[i][indent:])
                i += 1
            lang = "pycon" if block and block[0].startswith(">>>") else "python"
            out += ["", f"```{lang}", *block, "```", ""]
            continue
        out.append(prose(line))
        i += 1
    return "\n".join(out).strip() + "\n"


def prose(line: str) -> str:
    """``<`` and ``>`` outside code spans as entities: ``<name>`` is text, not an HTML tag."""
    parts = line.split("`")
    return "`".join(p.replace("<", "&lt;").replace(">", "&gt;") if i % 2 == 0 else p for i, p in enumerate(parts))


def cell(text: str) -> str:
    return prose(text.replace("|", "\\|").replace("\n", " "))


def yaml_options(name: str) -> dict[str, tuple[str, str]]:
    """``{key: (value as written, comment)}`` of the metric's own YAML, the settings a run uses, with those of
    a base it includes (``- /keyword_verdict_base@…``: ``conf/keyword_verdict_base.yaml``)."""
    path = CONF / f"{name}.yaml"
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    bases = [(CONF.parent / f"{b}.yaml").read_text(encoding="utf-8") for b in re.findall(r"^  - /(\w+)@", text, re.M)]
    found = {}
    for body, indent in [*((b, "") for b in bases), (text, "  ")]:
        for m in re.finditer(rf"^{indent}(\w+): ([^#\n]*?)\s*(?:#\s*(.*))?$", body, re.M):
            if m.group(1) not in ("_target_", "defaults"):
                found[m.group(1)] = (m.group(2), m.group(3) or "")
    return found


def reads(info) -> str:
    """The fields a metric reads; for one whose fields depend on the dataset (``relevance: auto``), each choice."""
    fields = info.required_fields()
    text = ", ".join(f"`{f}`" for f in fields) or "other metrics of the run"
    if "relevance" in info.options:
        other = info.required_fields({"relevance": "matcher"})
        if other != fields:
            text += " when the dataset has both, else " + ", ".join(f"`{f}`" for f in other)
    return text


def bounds(lo: float, hi: float) -> str:
    return f"[{lo:g}, ∞)" if math.isinf(hi) else f"[{lo:g}, {hi:g}]"


def label_words(kind: str, lo: float, hi: float) -> str:
    return {"binary": "binary, 0 or 1", "ordinal": f"ordinal, a whole number from {lo:g} to {hi:g}",
            "continuous": f"continuous, a number from {lo:g} to {hi:g}"}[kind]


def metric_section(info) -> str:
    doc = inspect.getdoc(info.fn) or ""
    conf = yaml_options(info.name)
    facts = [
        f"**reads** {reads(info)}",
        f"**range** {bounds(*info.bounds)}, {'higher' if info.higher_is_better else 'lower'} is better",
    ]
    if info.level == "dataset":
        facts.append("**one value for the dataset** (no per-sample values)")
    if info.judge:
        asks = ", ".join(f"`{k.name}`" for k in info.judge.asks)
        facts.append(f"**asks the judge** ({asks}: prompts `ragexp/metrics/judged/<name>.v1.txt`)" if asks
                     else "**asks the judge nothing**: computed from the run's other judge scores")
        facts.append(f"**people's labels** (`human.{info.name}`, [records](records.md#human-labels-human)): "
                     + label_words(*info.label_scale))
    if info.binary:
        facts.append("**0/1 per sample**")
    if info.variant_params:
        facts.append("a list for " + " or ".join(f"`{p}`" for p in info.variant_params)
                     + f" logs one key per value (`{info.name}/…`)")
    rows = []
    for key, default in info.options.items():
        if key == "judge":
            continue
        written, comment = conf.get(key, (repr(default) if default is not None else "null", ""))
        rows.append(f"| `{key}` | `{cell(written)}` | {cell(comment)} |")
    text = f"### `{info.name}`\n\n" + "; ".join(facts) + ".\n\n" + md(doc)
    if rows:
        text += "\n| option | default in `conf/metric/" + info.name + ".yaml` | |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    return text


def suites() -> str:
    rows = []
    for path in sorted(CONF.glob("*.yaml")):
        body = path.read_text(encoding="utf-8")
        members = [m for m in re.findall(r"^  - (\w+)", body, re.M) if m != "_self_"]
        if "defaults:" not in body or not members:  # a metric of its own (a base it includes is no member)
            continue
        comments = re.findall(r"^#(.*)$", body.split("defaults:")[0], re.M)
        # a comment line indented further is a command: shown as code
        about = " ".join(f"`{c.strip()}`" if c.startswith("   ") else c.strip() for c in comments)
        rows.append(f"| `{path.stem}` | {cell(about)} | {', '.join(f'`{m}`' for m in members)} |")
    return "| suite | what it is | members |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def glance(by_module: dict, families: tuple) -> str:
    """One row per metric: its key (a link to its section), what it reads, its range, its first sentence."""
    rows = []
    for family in families:
        for info in by_module.get(family, []):
            first = (inspect.getdoc(info.fn) or "").split("\n\n")[0].replace("\n", " ")
            first = re.split(r";\s*range\b", first)[0].rstrip(". ")
            rows.append(f"| [`{info.name}`](#{info.name.lower()}) | {reads(info)} | {bounds(*info.bounds)} | {cell(md(first).strip())} |")
    return "| key | reads | range | what it measures |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


def reference() -> str:
    from ragexp.metrics.base import load_all

    registry = load_all()
    by_module: dict[str, list] = {}
    for info in registry.values():
        by_module.setdefault(info.fn.__module__.rsplit(".", 1)[-1], []).append(info)
    unknown = sorted(set(by_module) - set(ORDER))  # a new family is listed too, at the end
    parts = ["## Suites\n", suites(), "## All metrics\n", glance(by_module, (*ORDER, *unknown))]
    for family in (*ORDER, *unknown):
        infos = by_module.get(family)
        if not infos:
            continue
        module = inspect.getmodule(infos[0].fn)
        doc = inspect.getdoc(module) or ""
        title, _, body = doc.partition("\n")
        title = md(title).strip().rstrip(".")
        source = re.search(r"\s*\(([^()]*)\)", title)  # "(seed 002, continuous-eval)": the sources
        if source:
            title = (title[:source.start()] + title[source.end():]).strip()
        where = f"Module `{module.__name__}`" + (f"; sources: {source.group(1)}" if source else "")
        parts.append(f"## {title}\n\n*{where}.*\n\n{md(body)}")
        parts += [metric_section(info) for info in infos]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != "metrics.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/metrics.md lost its marker {MARKER}: the generated reference has nowhere to go")
    return markdown.replace(MARKER, reference())


def on_page_content(html: str, page, config, files) -> str:
    """Docstrings rendered by mkdocstrings keep Sphinx roles (``:func:`x```): show them as plain code."""
    return re.sub(r":(?:mod|func|class|meth|attr|data|exc):(<code>)~?", r"\1", html)
