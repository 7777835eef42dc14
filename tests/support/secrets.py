"""Known secret values to plant in a run, and a scan of everything the run left behind.

``planted(tmp)`` makes a fresh set of secret values (random, so a hit is never a coincidence):
a sudo password file's content, HF_TOKEN / FOO_API_KEY / X_PASSWORD / Y_SECRET environment
values, api_key / admin_api_key / ssl_keyfile_password server flags and an SSH private key's
text. ``scan(paths, outputs)`` greps every file under ``paths`` (a whole run folder, the JUnit
XML, the HTML report) and every text in ``outputs`` (pytest's stdout/stderr) for each value, and
for each line of the key (a log or report may show one line of it)."""

from __future__ import annotations

import re
import secrets as _random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


def _value(kind: str) -> str:
    return f"{kind}-{_random.token_hex(8)}"


@dataclass(frozen=True)
class Planted:
    sudo_password: str
    sudo_password_file: Path
    env: Mapping[str, str]  # HF_TOKEN, FOO_API_KEY, X_PASSWORD, Y_SECRET, SSH_PRIVATE_KEY
    server: Mapping[str, str]  # api_key, admin_api_key, ssl_keyfile_password
    ssh_key_text: str
    ssh_key_file: Path

    def values(self) -> dict[str, str]:
        """name → secret text; the key also line by line (its body lines are the secret)."""
        out = {"sudo password": self.sudo_password}
        out |= {f"env {k}": v for k, v in self.env.items() if k != "SSH_PRIVATE_KEY"}
        out |= {f"server {k}": v for k, v in self.server.items()}
        for i, line in enumerate(self.ssh_key_text.splitlines()):
            if "PRIVATE KEY" not in line and len(line) >= 16:
                out[f"ssh key line {i}"] = line
        return out


def planted(folder: Path) -> Planted:
    folder.mkdir(parents=True, exist_ok=True)
    password = _value("sudo-pw")
    pw_file = folder / "sudo_password"
    pw_file.write_text(password + "\n")
    body = [_random.token_urlsafe(48) for _ in range(3)]
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(body) + (
        "\n-----END OPENSSH PRIVATE KEY-----\n")
    key_file = folder / "id_test"
    key_file.write_text(key)
    key_file.chmod(0o600)
    env = {"HF_TOKEN": _value("hf"), "FOO_API_KEY": _value("fooapi"),
           "X_PASSWORD": _value("xpw"), "Y_SECRET": _value("ysecret"), "SSH_PRIVATE_KEY": key}
    # a password with a space: a regex over a quoted command line sees only its first word
    server = {"api_key": _value("apikey"), "admin_api_key": _value("admin"),
              "ssl_keyfile_password": _value("ssl pw") + " with space"}
    return Planted(password, pw_file, env, server, key, key_file)


@dataclass(frozen=True)
class Hit:
    secret: str  # which planted value (its name, never its text)
    where: str  # a file path or "output[i]"
    line: int

    def __str__(self) -> str:
        return f"{self.secret} in {self.where}:{self.line}"


def _files(paths: Iterable[Path]) -> Iterable[Path]:
    for path in paths:
        if path.is_dir():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file())
        elif path.is_file():
            yield path


def scan(paths: Iterable[Path], outputs: Iterable[str], plant: Planted) -> list[Hit]:
    """Every place a planted secret's text appears (an escaped form too: JSON/HTML/XML)."""
    wanted = plant.values()
    # the random part of each value too: a redaction that keeps half a value is a leak
    forms = {name: {v, *re.findall(r"[0-9a-f]{16}", v)} for name, v in wanted.items()}
    hits: list[Hit] = []

    def check(text: str, where: str) -> None:
        for no, line in enumerate(text.splitlines(), 1):
            for name, variants in forms.items():
                if any(v in line for v in variants):
                    hits.append(Hit(name, where, no))

    for f in _files(paths):
        if f in (plant.sudo_password_file, plant.ssh_key_file):
            continue  # the planted files themselves
        check(f.read_bytes().decode("utf-8", "replace"), str(f))
    for i, text in enumerate(outputs):
        check(text, f"output[{i}]")
    return hits
