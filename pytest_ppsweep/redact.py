"""The one place that knows what a secret looks like and how it is hidden: server-info fields
(``api_key``, ``admin_api_key``, ``ssl_keyfile_password``, ``*_token``, ``*password*``…),
CLI flags (``--api-key X``), ``key = "value"`` lines of a sweep file, and a known secret's text
in command output. Every artifact writer (probe, runstore, manifest, launchers) goes through it.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"


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
