"""Flatten a config to MLflow params and keep secrets out of everything ragexp writes or logs: the one
place that decides what a secret is (keys named like credentials, such environment variables' values and
the variables a config names as holding a key, URL passwords, Authorization headers, provider-shaped keys).
Definitions and where it applies: docs/guarantees.md, "Nothing leaked".

Redaction by value is exact: a known secret's value is replaced wherever it appears only when it is
distinctive (:func:`distinctive`: not a plain word or number), so a password ``mlflow`` never rewrites the
word in a path, a config or the data; such a value is redacted where it appears as a secret (a URL's
password, an ``Authorization`` header, ``password=…``, ``"token": "…"``). A URL's user name alone is not a
secret (``postgresql://mlflow@db`` stays as it is).

    >>> scrub("postgresql://mlflow@db/runs in /srv/mlflow-project/mlflow.db")
    'postgresql://mlflow@db/runs in /srv/mlflow-project/mlflow.db'
    >>> scrub('headers: {"Authorization": "Bearer mlflow"} POSTGRES_PASSWORD=mlflow')
    'headers: {"Authorization": "Bearer ***"} POSTGRES_PASSWORD=***'

    >>> flatten({"judge": {"model": "gpt-4o", "api_key": "sk-123"}, "retriever": {"top_k": 5}})
    {'judge.model': 'gpt-4o', 'judge.api_key': '***', 'retriever.top_k': '5'}
    >>> scrub("judge.api_base=http://me:pa55@127.0.0.1:8000/v1 +judge.api_key=abc retriever.top_k=5")
    'judge.api_base=http://***@127.0.0.1:8000/v1 +judge.api_key=*** retriever.top_k=5'
    >>> print(scrub(r"judge.api_base=http\\://me\\:pa55@host\\:8000/v1"))  # as Hydra quotes an override
    judge.api_base=http\\://***@host\\:8000/v1
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

REDACTED = "***"
_SECRET_KEY = re.compile(
    r"(^|[_.\-])(api[_\-]?key|apikey|key|token|access[_\-]?token|secret|password|passwd|credentials?|"
    r"authorization|auth)$",
    re.IGNORECASE,
)
#: An environment variable whose name has one of these words (between underscores) holds a secret:
#: OPENAI_API_KEY, MY_SERVICE_TOKEN, AWS_SECRET_ACCESS_KEY, PGPASSWORD; not TOKENIZERS_PARALLELISM,
#: PWD or SSH_AUTH_SOCK (a folder and a socket path).
_SECRET_ENV = re.compile(r"(^|_)(API_?KEY|APIKEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)|PASSWORD$",
                         re.IGNORECASE)
#: Keys of known providers' shapes: OpenAI / Anthropic (``sk-…``, ``sk-ant-…``, ``sk-proj-…``), Google (``AIza…``),
#: Hugging Face (``hf_…``), GitHub (``ghp_…``, ``github_pat_…``), GitLab (``glpat-…``), Slack (``xox?-…``), AWS
#: access key ids (``AKIA…``), Groq (``gsk_…``), Replicate (``r8_…``), Perplexity (``pplx-…``)
_SECRET_VALUE = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|"
    r"github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_\-]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}|"
    r"gsk_[A-Za-z0-9]{20,}|r8_[A-Za-z0-9]{20,}|pplx-[A-Za-z0-9]{20,})")
#: An ``Authorization`` header (or ``x-api-key`` / ``api-key``) and its value, as a server may echo it in an error:
#: ``Authorization: Bearer …``, ``'authorization': 'Basic …'``
_AUTH_HEADER = re.compile(
    r"(\b(?:proxy-)?(?:authorization|x-api-key|api-key|x-goog-api-key)[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:Bearer|Basic|Token|Key)\s+)?)(?!\*\*\*|(?:Bearer|Basic|Token|Key)\s)[^\s\"',;}\]]+", re.IGNORECASE)
#: ``"password": "…"`` — a quoted key naming a credential and its quoted value (JSON, a Python dict's repr)
_SECRET_JSON = re.compile(
    r"""(["'](?:[\w\-]*[_\-])?(?:api[_\-]?key|apikey|token|access[_\-]?token|secret|password|passwd|credentials?)"""
    r"""["']\s*:\s*["'])(?!\*\*\*["'])[^"'\n]+(?=["'])""", re.IGNORECASE)
#: ``scheme://user:password@`` (or ``scheme://token@``) in a URL, in every form SQLAlchemy or MLflow
#: accepts: the user may hold ``@`` (SQLAlchemy reads it up to the first ``:``), the password ``/``,
#: ``:`` and ``@`` (it runs to the last ``@`` before white space or a quote); Hydra writes an
#: override's ``:`` as ``\:``
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*\\?://)(?:[^/:\s'\"]*:[^\s'\"]*|[^/@\s'\"]+)@")
#: ``<key>=<value>`` where the key (its last dotted part) names a credential, as in an override;
#: the value ends at white space, a quote, a ``]`` or the ``,`` before the next ``key=`` (run names
#: join a job's overrides with commas). A key that is only ``key`` or ends in one that is not a credential's
#: (``answer_key=output``, ``sort_key=score``, the help's ``key=value``) is not one.
_SECRET_PAIR = re.compile(
    r"(?<![\w.\-])((?:[\w\-]+\.)*(?:[\w\-]*[_\-])?(?:api[_\-]?key|apikey|"
    r"(?:secret|private|access|auth|client|signing|encryption|master|license)[_\-]?key|token|access[_\-]?token|secret|"
    r"password|passwd|credentials?|authorization|auth))=(?!\*\*\*(?:[\s'\",\]]|$))"
    r"(?:[^\s'\"\],]|,(?![\w.+~/\-]+=))+",  # the value: to the next override (a sweep's k1,k2 is one value)
    re.IGNORECASE,
)
MAX_PARAM_LEN = 6000


def _environ() -> dict[str, str]:
    """A snapshot of ``os.environ``; MLflow's telemetry thread may unset a variable while we read it."""
    for _ in range(20):
        try:
            return dict(os.environ)
        except KeyError:
            continue
    return {}


#: Environment variables a config names as holding a key (``judge.api_key_env: JUDGE_AUTH``), whatever their names
_DECLARED: set[str] = set()
#: a config key that names such a variable
_KEY_ENV = re.compile(r"(^|[_.\-])(api_?key|key|token|secret|password|credentials?)_env$", re.IGNORECASE)
#: a plain word, words joined by ``-``/``_``/``.``/space, or a number: too common to replace wherever it appears
_WORDLIKE = re.compile(r"[A-Za-z]+(?:[ _.\-][A-Za-z]+)*|[0-9]+")
#: a URL's user name alone (``postgresql://mlflow@db``): lower case, as user names are; a bare token has capitals
#: or digits mixed in, or is long
_USER_NAME = re.compile(r"[a-z_][a-z_.\-]{0,31}")


def declare_secret_env(name: str | None) -> None:
    """Count the environment variable ``name`` as holding a secret (the judge's ``api_key_env``, a generator's)."""
    if name and isinstance(name, str):
        _DECLARED.add(name)


def distinctive(value: str) -> bool:
    """True for a secret's value that can be replaced wherever it appears without rewriting ordinary text: at
    least 6 characters, not a plain word or number (and at least 24 characters if it is one), not a path.

    >>> [distinctive(v) for v in ("mlflow", "postgres", "123456", "hunter2", "s3/cr:et", "/home/me/key.json")]
    [False, False, False, True, True, False]
    """
    if len(value) < 6 or value.startswith(("/", "~/", "./", "../")):
        return False
    return len(value) >= 24 or not _WORDLIKE.fullmatch(value)


def _userinfo_secret(userinfo: str) -> str | None:
    """The secret in a URL's ``user:password`` (or bare token): the password, a token; None for a user name."""
    info = userinfo.replace("\\:", ":")
    if ":" in info:  # SQLAlchemy reads the user up to the first ':'
        return info.split(":", 1)[1] or None
    return None if _USER_NAME.fullmatch(info) else info


def _url_sub(m: re.Match) -> str:
    return m.group(0) if _userinfo_secret(m.group(0)[len(m.group(1)):-1]) is None else f"{m.group(1)}{REDACTED}@"


def _env_secrets() -> list[str]:
    """The distinctive secret values of the environment (:func:`distinctive`), longest first: variables named
    like a credential or declared (:func:`declare_secret_env`), and the passwords of URLs in any variable."""
    found = []
    for k, v in _environ().items():
        if not v:
            continue
        if "://" in v and "@" in v:  # a URL: its password (or token) is the secret, not its user name or host
            parts = [_userinfo_secret(m.group(0)[len(m.group(1)):-1]) for m in _URL_USERINFO.finditer(v)]
            found += [p for p in parts if p]
            if parts or not (k.startswith(HIDDEN_ENV) or k in _DECLARED):
                continue
        if k in _DECLARED or (_SECRET_ENV.search(k) and not k.startswith(HIDDEN_ENV)) or (
                k.startswith(HIDDEN_ENV) and "://" not in v):
            found.append(v)
    return sorted({v for v in found if distinctive(v)}, key=len, reverse=True)


def env_secrets() -> list[str]:
    """The secret values :func:`scrub` replaces from the environment now, to pass to it as ``env_secrets`` when
    many texts are scrubbed in a row (reading the environment is most of a short text's cost)."""
    return _env_secrets()


def holds_secret(name: str, value: str) -> bool:
    """True for an environment variable that holds a secret: named like a credential, declared by a config
    (:func:`declare_secret_env`), a typed secret override, or a value with credentials in it (a URL's password,
    a provider-shaped key)."""
    return bool(name in _DECLARED or name.startswith(HIDDEN_ENV) or _SECRET_ENV.search(name)
                or scrub(value, []) != value)


def scrub(text: str, env_secrets: list[str] | None = None) -> str:
    """``text`` with every secret replaced: environment values, URL credentials, ``<secret key>=value``
    pairs and key-shaped values. ``env_secrets`` saves re-reading the environment in a loop."""
    for value in _env_secrets() if env_secrets is None else env_secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    if "://" in text:
        text = _URL_USERINFO.sub(_url_sub, text)
    if "=" in text:
        text = _SECRET_PAIR.sub(rf"\1={REDACTED}", text)
    if ":" in text or "=" in text:
        text = _AUTH_HEADER.sub(rf"\1{REDACTED}", text)
        text = _SECRET_JSON.sub(rf"\1{REDACTED}", text)
    return _SECRET_VALUE.sub(REDACTED, text)


def redact_url(text: str) -> str:
    """Only the credentials of URLs redacted (for a store's address printed in a command).

    >>> redact_url("postgresql://ragexp:hunter2@db:5432/runs")
    'postgresql://***@db:5432/runs'
    """
    return _URL_USERINFO.sub(_url_sub, text)


def restore_url(saved: str, environ: Mapping[str, str] | None = None) -> str:
    """The full address of a store whose credentials were redacted when it was saved (``mlflow_run.json``,
    ``mlflow_parent_run.json`` keep :func:`redact_url`'s form): an environment value whose redacted form is
    ``saved`` (``MLFLOW_TRACKING_URI``, the sweep's own); ``saved`` itself when nothing was redacted.

    >>> restore_url("postgresql://***@db/runs", {"MLFLOW_TRACKING_URI": "postgresql://u:p/w@db/runs"})
    'postgresql://u:p/w@db/runs'
    """
    if f"{REDACTED}@" not in saved:
        return saved
    for value in (_environ() if environ is None else environ).values():
        if "://" in value and value != saved and redact_url(value) == saved:
            return value
    from ragexp.errors import ConfigError

    raise ConfigError(f"the store {saved} was saved without its credentials (ragexp never writes them): set "
                      "MLFLOW_TRACKING_URI to its full address, or give it (upload: --tracking-uri)")


#: overrides whose secret value :func:`hide_overrides` moved into this process's environment
HIDDEN_ENV = "RAGEXP_SECRET_OVERRIDE_"


def hide_overrides(argv: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """The command line with each override value that holds a secret (a key, a URL's password) moved
    into an environment variable of this process and read back by ``${oc.env:...}``: Hydra, its
    launchers' job files (submitit's pickles), ``.hydra/overrides.yaml`` and multirun.yaml then hold
    the variable's name, never the secret. Sweeps (``a,b``), quoting and escapes are left as typed.

    >>> env = {}
    >>> hide_overrides(["tracking.uri=postgresql://u:p/w@db/x", "metric=answer"], env)
    ['tracking.uri=${oc.env:RAGEXP_SECRET_OVERRIDE_1}', 'metric=answer']
    >>> env
    {'RAGEXP_SECRET_OVERRIDE_1': 'postgresql://u:p/w@db/x'}
    """
    environ = os.environ if environ is None else environ
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if (eq and not arg.startswith("-") and value and scrub(arg) != arg and "${" not in value
                and not any(c in value for c in ",\\'\"()[]{} ")):
            name = f"{HIDDEN_ENV}{sum(k.startswith(HIDDEN_ENV) for k in environ) + 1}"
            environ[name] = value
            arg = f"{key}=${{oc.env:{name}}}"
        out.append(arg)
    return out


def scrub_columns(columns: dict[str, list]) -> dict[str, list]:
    """Plain columns (the per-sample table: details quote errors, contexts quote pages) with every
    text scrubbed, in a text cell or a list cell (each distinct text once)."""
    secrets = _env_secrets()
    # a cell that holds none of these cannot change: one regex search instead of a full scrub
    maybe = re.compile("|".join([re.escape(v) for v in secrets] + [
        "://", "=", "sk-", "AIza", "hf_", "gh", "github_pat_", "glpat-", "xox", "AKIA", "gsk_", "r8_", "pplx-",
        "(?i:authorization|api-key)", "[\"']\\s*:"]))
    done: dict[str, str] = {}

    def clean(v: Any) -> Any:
        if isinstance(v, list):  # a new list only where a text in it changed
            out = [clean(x) for x in v]
            return out if any(a is not b for a, b in zip(out, v)) else v
        if not isinstance(v, str):
            return v
        if v not in done:  # the status columns and the retrieved passages repeat a few texts
            done[v] = scrub(v, secrets) if maybe.search(v) else v
        return done[v]

    return {name: [clean(v) for v in values] for name, values in columns.items()}


class RedactingFilter:
    """A ``logging`` filter that scrubs each record's message (Hydra's "Launching jobs" lines list
    every job's overrides). Named in conf/hydra/{hydra,job}_logging/ragexp.yaml."""

    def filter(self, record: Any) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


class ScrubbingStream:
    """A text stream (``sys.stdout``/``sys.stderr``) that scrubs what is written through it: Hydra
    prints some messages itself (an override it cannot apply, quoted back in full)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(scrub(text) if isinstance(text, str) else text)
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, flush, fileno, encoding, ... of the real stream
        return getattr(self._stream, name)


def redact_yaml_file(path: Path) -> bool:
    """Rewrite one of Hydra's YAML files with its secrets redacted; True when anything was."""
    import yaml

    try:  # libyaml's loader when there (Hydra's hydra.yaml is long: the pure-Python one takes 0.1 s)
        data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return False
    clean = redact(data)
    if clean == data:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(yaml.safe_dump(clean, sort_keys=False, allow_unicode=True))
    os.replace(tmp, path)
    return True


def redact(obj: Any, env_secrets: list[str] | None = None) -> Any:
    """A copy of a nested dict/list with secret-keyed values replaced and secret strings scrubbed
    (the environment's secrets read once for the whole of ``obj``, or ``env_secrets``)."""
    if env_secrets is None:
        env_secrets = _env_secrets()
    if isinstance(obj, Mapping):
        for k, v in obj.items():  # judge.api_key_env: JUDGE_AUTH — that variable holds a secret, whatever its name
            if isinstance(v, str) and _KEY_ENV.search(str(k)) and v not in _DECLARED:
                declare_secret_env(v)
                env_secrets = _env_secrets()
        return {k: (REDACTED if _SECRET_KEY.search(str(k)) and obj[k] not in (None, "") else redact(v, env_secrets))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v, env_secrets) for v in obj]
    if isinstance(obj, str):
        return scrub(obj, env_secrets)
    return obj


def redact_span(span: Any) -> None:
    """An MLflow span processor (``mlflow.tracing.configure(span_processors=[redact_span])``), run as each span
    ends, before MLflow writes it anywhere: its attributes (inputs, outputs, whatever the code set), its status
    message and its events (an exception's message and stack trace) redacted as :func:`redact` does, with the
    environment read now (a key the code put in a variable mid-run counts). The trace's request and response
    previews are made from the root span's redacted inputs and outputs."""
    from mlflow.entities import SpanStatus

    from ragexp._compat import rewrite_span_events

    secrets = _env_secrets()
    for key, value in list(span.attributes.items()):
        clean = redact({key: value}, secrets)[key]
        if clean != value:
            span.set_attribute(key, clean)
    status = span.status
    said = getattr(status, "description", None)
    if said and scrub(said, secrets) != said:
        span.set_status(SpanStatus(status.status_code, scrub(said, secrets)))
    rewrite_span_events(span, lambda text: scrub(text, secrets))


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted keys → string values, secrets redacted, long values cut to MLflow's limit."""
    out: dict[str, str] = {}
    for key, value in redact(cfg).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            text = str(value)
            out[name] = text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."
    return out
