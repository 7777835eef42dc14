"""The one place that knows what a secret looks like and how it is hidden: server-info fields
(``api_key``, ``admin_api_key``, ``ssl_keyfile_password``, ``*_token``, ``*password*``…),
environment variables (``HF_TOKEN``, ``*_API_KEY``, ``*_PASSWORD``, ``*_SECRET``…), CLI flags
(``--api-key X``, as text or as argv tokens), ``key = "value"`` lines of a sweep file, and a
known secret's text in command output (:func:`scrub`: the sudo password read from its file).
Every artifact writer (probe, sweeprun, runstore, manifest, the launchers, the SSH host) goes
through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"  # a secret-looking field, flag or line
SCRUBBED = "***"  # a known secret's text in command output


_SECRET_KEYS = frozenset({"api_key", "admin_api_key", "ssl_keyfile_password", "hf_token"})


_SECRET_FLAG = re.compile(
    r"(--(?:api-key|admin-api-key|ssl-keyfile-password|hf-token)(?:\s+|=))(\S+)"
)


def is_secret_key(key: str) -> bool:
    k = key.lower()
    return (
        k in _SECRET_KEYS
        or k.endswith("_api_key")
        or "password" in k
        or "secret" in k
        or k.endswith("_token")
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
        return _SECRET_FLAG.sub(lambda m: m.group(1) + REDACTED, value)
    return value


_SECRET_VALUE = re.compile(r'(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<eq>\s*=\s*)"(?P<value>[^"]*)"')


def _redact_pair(match: re.Match[str]) -> str:
    if not is_secret_key(match.group("key")) or not match.group("value"):
        return match.group(0)
    return f'{match.group("key")}{match.group("eq")}"{REDACTED}"'


def redact_toml(text: str) -> str:
    """A sweep file's text with the value of every secret key (``api_key = "…"``) redacted."""
    return _SECRET_VALUE.sub(_redact_pair, text)


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
