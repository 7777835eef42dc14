"""Run commands on a node over SSH (fabric), with testinfra's habits.

* Every argument goes through ``shlex.quote``: a command is an argument list, never a shell string
  a caller assembled.
* Host keys are checked against ``known_hosts`` (the cluster's file, else ``~/.ssh/known_hosts``);
  ``verify_host_keys = false`` in the matrix is the explicit opt-out.
* Any failure to reach or log into a host is a :class:`HostConnectionError` naming the host (what
  testinfra reports for ssh's exit status 255); a command's own exit status is returned as is.
* ``sudo_password_file``: commands run as root through ``sudo -S``; the password travels on the
  command's standard input only, is read from the file when needed and is scrubbed from anything
  returned, so it never reaches a log, a report or an error message.
* :func:`on_all` runs one function per node concurrently.
"""

from __future__ import annotations

import io
import logging
import os
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import paramiko
from fabric import Config, Connection
from invoke.exceptions import CommandTimedOut
from paramiko.ssh_exception import NoValidConnectionsError

from pytest_ppsweep.cluster.base import CommandResult, HostError
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Cluster
from pytest_ppsweep.redact import scrub

__all__ = [
    "HostConnectionError",
    "SshHost",
    "SshSettings",
    "on_all",
    "shared_host",
]

T = TypeVar("T")
R = TypeVar("R")

# A node that cannot be reached is raised as HostConnectionError naming the host and the cause;
# paramiko's transport thread would also log its own traceback to stderr, once per node.
logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)


class HostConnectionError(HostError):
    """The host could not be reached or logged into over SSH (testinfra: exit status 255)."""


@dataclass(frozen=True)
class SshSettings:
    """How to reach the nodes of one cluster (from the matrix's cluster table)."""

    user: str = "root"
    key_filename: str = ""
    known_hosts: str = ""  # empty: ~/.ssh/known_hosts
    verify_host_keys: bool = True
    sudo_password_file: str = ""
    port: int = 22
    connect_timeout: float = 10.0

    @classmethod
    def from_cluster(cls, cluster: Cluster) -> SshSettings:
        return cls(
            user=cluster.ssh_user,
            key_filename=os.path.expanduser(cluster.ssh_key) if cluster.ssh_key else "",
            known_hosts=os.path.expanduser(cluster.known_hosts) if cluster.known_hosts else "",
            verify_host_keys=cluster.verify_host_keys,
            sudo_password_file=(
                os.path.expanduser(cluster.sudo_password_file) if cluster.sudo_password_file else ""
            ),
        )

    @property
    def known_hosts_path(self) -> str:
        return self.known_hosts or os.path.expanduser("~/.ssh/known_hosts")

    def paramiko_client(self) -> paramiko.SSHClient:
        """An unconnected client whose host-key policy follows these settings."""
        client = paramiko.SSHClient()
        if self.verify_host_keys:
            path = self.known_hosts_path
            if os.path.exists(path):
                # "system" host keys: read, never written back
                client.load_system_host_keys(path)
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        return client

    def connect_kwargs(self) -> dict[str, object]:
        kw: dict[str, object] = {}
        if self.key_filename:
            # only the named key: an agent or ~/.ssh/id_* must not decide which identity is used
            kw.update(key_filename=self.key_filename, look_for_keys=False, allow_agent=False)
        return kw

    def read_password(self) -> str:
        try:
            return Path(self.sudo_password_file).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            # the path may be shown, never the content
            raise HostError(
                f"sudo_password_file {self.sudo_password_file}: cannot read it ({exc.strerror})"
            ) from None


def describe_connect_error(exc: BaseException, settings: SshSettings) -> str:
    """Why an SSH connection failed, in the user's terms."""
    if isinstance(exc, paramiko.BadHostKeyException):
        return (
            f"host key mismatch: the server offered a {exc.key.get_name()} key that differs from "
            f"the one in {settings.known_hosts_path} (a reinstalled host, or not the host you "
            "meant); fix known_hosts, or set verify_host_keys = false for this cluster"
        )
    text = str(exc) or type(exc).__name__
    if "not found in known_hosts" in text:
        return (
            f"host key not in {settings.known_hosts_path} (add it with ssh-keyscan, or set "
            "verify_host_keys = false for this cluster)"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        key = f"key {settings.key_filename}" if settings.key_filename else "the default keys"
        return f"authentication as {settings.user!r} with {key} failed ({text})"
    if isinstance(exc, NoValidConnectionsError):
        reasons = "; ".join(sorted({e.strerror or str(e) for e in exc.errors.values()}))
        return f"cannot connect to port {settings.port} ({reasons or text})"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"no answer within {settings.connect_timeout:.0f} s"
    return f"{type(exc).__name__}: {text}"


_CONNECT_ERRORS = (paramiko.SSHException, OSError, EOFError, socket.timeout)


class SshHost:
    """One node reached over SSH; ``run`` is safe to call from several threads."""

    def __init__(self, name: str, address: str, settings: SshSettings) -> None:
        self.name = name
        self.address = address
        self.settings = settings
        self._lock = threading.Lock()
        self._conn: Connection | None = None

    def __repr__(self) -> str:
        return f"SshHost({self.name!r}, {self.settings.user}@{self.address})"

    @property
    def sudo(self) -> bool:
        return bool(self.settings.sudo_password_file)

    def _fail(self, exc: BaseException) -> HostConnectionError:
        return HostConnectionError(
            f"host {self.name} ({self.address}): SSH connection as {self.settings.user} failed: "
            f"{describe_connect_error(exc, self.settings)}"
        )

    def _timed_out(self, argv: Sequence[str], timeout: float) -> HostError:
        return HostError(
            f"host {self.name} ({self.address}): {shlex.join(argv)[:200]} did not finish "
            f"within {timeout:.0f} s"
        )

    def connection(self) -> Connection:
        """The open fabric connection (opened, or re-opened after a drop, on demand)."""
        with self._lock:
            if self._conn is not None and self._conn.is_connected:
                return self._conn
            if self._conn is not None:
                self._conn.close()
            conn = Connection(
                self.address,
                user=self.settings.user,
                port=self.settings.port,
                connect_timeout=int(self.settings.connect_timeout),
                connect_kwargs=self.settings.connect_kwargs(),
                config=Config(overrides={"run": {"hide": True, "warn": True}}),
            )
            conn.client = self.settings.paramiko_client()
            try:
                conn.open()
                transport = conn.client.get_transport()
                if transport is not None:
                    transport.set_keepalive(15)
            except _CONNECT_ERRORS as exc:
                conn.close()
                raise self._fail(exc) from None
            self._conn = conn
            return conn

    def transport(self) -> paramiko.Transport:
        transport = self.connection().client.get_transport()
        if transport is None:  # pragma: no cover - connection() just opened it
            raise HostConnectionError(f"host {self.name} ({self.address}): no SSH transport")
        return transport

    def command_line(self, argv: Sequence[str], sudo: bool | None = None) -> str:
        """The remote shell line for ``argv``: every argument quoted, sudo in front if used."""
        line = shlex.join(argv)
        if self.sudo if sudo is None else sudo:
            # -k: always ask, so the password line on stdin is always consumed by sudo itself
            line = "sudo -k -S -p '' -- " + line
        return line

    def run(
        self, argv: Sequence[str], timeout: float = 60.0, sudo: bool | None = None
    ) -> CommandResult:
        """Run ``argv`` on the host; ``sudo`` defaults to: the cluster has a password file."""
        use_sudo = self.sudo if sudo is None else sudo
        password = self.settings.read_password() if use_sudo else ""
        line = self.command_line(argv, use_sudo)
        conn = self.connection()
        started = time.monotonic()
        try:
            res = conn.run(
                line,
                hide=True,
                warn=True,
                pty=False,
                timeout=timeout,
                in_stream=io.StringIO(password + "\n") if use_sudo else False,
            )
        except CommandTimedOut:
            raise self._timed_out(argv, timeout) from None
        except _CONNECT_ERRORS as exc:
            raise self._fail(exc) from None
        if res.exited is None or res.exited < 0:
            if time.monotonic() - started >= timeout:
                # invoke closed the channel on timeout but lost the race to report it
                raise self._timed_out(argv, timeout)
            # the channel closed without an exit status: the connection went away
            raise self._fail(EOFError("connection closed before the command ended"))
        return CommandResult(
            self.name,
            tuple(argv),
            int(res.exited),
            scrub(res.stdout, password),
            scrub(res.stderr, password),
        )

    def sh(self, script: str, timeout: float = 60.0, sudo: bool | None = None) -> CommandResult:
        """Run a shell snippet (``sh -c script``); the snippet must quote what it interpolates."""
        return self.run(["sh", "-c", script], timeout=timeout, sudo=sudo)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def on_all(items: Sequence[T], fn: Callable[[T], R]) -> list[R]:
    """``fn`` on every item at once (one thread per node); results in the items' order.

    An exception of one call is re-raised after every call has ended.
    """
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        futures = [pool.submit(fn, item) for item in items]
        errors = [f.exception() for f in futures]
    for err in errors:
        if err is not None:
            raise err
    return [f.result() for f in futures]


def shared_host(registry: Registry, name: str, address: str, settings: SshSettings) -> SshHost:
    """The registry's :class:`SshHost` of a node (one SSH connection per node and settings)."""
    return registry.shared(("ssh", name, address, settings),
                           lambda: SshHost(name, address, settings))
