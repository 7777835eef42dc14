"""The one place that knows what a secret looks like and how it is hidden: server-info fields
(``api_key``, ``admin_api_key``, ``ssl_keyfile_password``, ``*_token``, ``*password*``…),
environment variables (``HF_TOKEN``, ``*_API_KEY``, ``*_PASSWORD``, ``*_SECRET``…), CLI flags
(``--api-key X``, as text or as argv tokens), ``key = "value"`` lines of a sweep file, and a
known secret's text in command output (:func:`scrub`: the sudo password read from its file).
Every artifact writer (probe, run.lifecycle, runstore, manifest, the launchers, the SSH host) goes
through it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"  # a secret-looking field, flag or line
SCRUBBED = "***"  # a known secret's text in command output


_SECRET_KEYS = frozenset({"api_key", "admin_api_key", "ssl_keyfile_password", "hf_token"})


# The value after a secret flag: a shell-quoted word (shlex.quote: '...' with '"'"' for a
# quote inside) or a bare one.
_SECRET_FLAG = re.compile(
    r"(--(?:api-key|admin-api-key|ssl-keyfile-password|hf-token)(?:\s+|=))"
    r"('[^']*'(?:\"'\"'[^']*')*|\S+)"
)
# A private key's text (PEM / OpenSSH), wherever it is: an env value, a file shown in a log.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    re.S,
)


def is_secret_key(key: str) -> bool:
    k = key.lower()
    return (
        k in _SECRET_KEYS
        or k.endswith("_api_key")
        or "password" in k
        or "secret" in k
        or k.endswith("_token")
        or "private_key" in k
    )


def redact(value: Any) -> Any:
    """A copy of ``value`` with every secret-looking field replaced (nulls stay null)."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if is_secret_key(str(k)) and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        value = _PRIVATE_KEY.sub(REDACTED, value)
        return _SECRET_FLAG.sub(lambda m: m.group(1) + REDACTED, value)
    return value


_SECRET_VALUE = re.compile(r'(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<eq>\s*=\s*)"(?P<value>[^"]*)"')


def _redact_pair(match: re.Match[str]) -> str:
    if not is_secret_key(match.group("key")) or not match.group("value"):
        return match.group(0)
    return f'{match.group("key")}{match.group("eq")}"{REDACTED}"'


def redact_toml(text: str) -> str:
    """A sweep file's text with the value of every secret key redacted: ``api_key = "…"`` by
    pattern, and every other form TOML has (literal ``'…'``, multi-line strings, a private key
    under any name) by the values the file parses to."""
    out = _SECRET_VALUE.sub(_redact_pair, text)
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        data = {}
    return scrub_all(_PRIVATE_KEY.sub(REDACTED, out), secret_values(data), REDACTED)


def secret_values(data: Any) -> list[str]:
    """The text of every secret in ``data`` (nested dicts/lists): the values of secret-looking
    keys and any private key; a multi-line value also line by line. Longest first, for
    :func:`scrub_all`."""
    found: set[str] = set()

    def add(value: Any) -> None:
        text = str(value).strip()
        if len(text) >= 4:
            found.add(text)
            found.update(line.strip() for line in text.splitlines() if len(line.strip()) >= 8)

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                if is_secret_key(str(k)) and isinstance(v, (str, int, float)) and v != "":
                    add(v)
                else:
                    walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)
        elif isinstance(node, str):
            for m in _PRIVATE_KEY.finditer(node):
                add(m.group(0))

    walk(data)
    return sorted(found, key=len, reverse=True)


def scrub_all(text: str, secrets: Iterable[str], mark: str = SCRUBBED) -> str:
    """``text`` with every known secret's text replaced (see :func:`secret_values`)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, mark)
    return text


def redact_env(env: Mapping[str, Any]) -> dict[str, str]:
    """Environment variables with the value of every secret-looking name redacted (an empty one
    stays empty: that it is unset is no secret)."""
    return {str(k): str(v) for k, v in redact(dict(env)).items()}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """argv with the token after a secret flag (``--api-key X``) and the value of a secret
    ``--flag=X`` redacted (:func:`redact` of one token cannot see the flag before it)."""
    out: list[str] = []
    for token in argv:
        prev = out[-1] if out else ""
        secret = prev.startswith("--") and is_secret_key(prev[2:].replace("-", "_"))
        out.append(REDACTED if secret else str(redact(token)))
    return out


def scrub(text: str, secret: str) -> str:
    """``text`` with every occurrence of a known ``secret`` replaced by :data:`SCRUBBED` (the
    command output of a host that was sent the secret); unchanged when there is none."""
    return text.replace(secret, SCRUBBED) if secret else text
