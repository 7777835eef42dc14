"""Ranks as Docker containers on the nodes, driven by the docker SDK over ``ssh://`` (or on this
machine's socket: cluster/kind_local_docker.py gives the launcher its own :class:`Daemons`).

One client per node talks to that node's dockerd through SSH (``docker system dial-stdio``),
with the cluster's key and host-key checking (not ``~/.ssh/config``, which is all the SDK's own
SSH adapter reads). Each rank is one container, named after the run, configuration and node
rank and labelled with them (the ``labels`` of :class:`~pytest_ppsweep.cluster.base.Launcher`),
so leftovers of a crashed run are found by label (:mod:`pytest_ppsweep.cluster.reap`). The
container uses the host's network and IPC namespace, a large /dev/shm, every GPU (a device
request, as ``--gpus all``), the sweep's ``devices``, the rank's environment and the model path
mounted read-only; ``init=True`` puts tini in front of the server so a stop takes a fraction of
a second.
Its output is streamed into the local ``log_path`` while it runs, and the equivalent
``docker run`` line (secrets redacted) is written next to it.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import docker
import paramiko
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.transport import SSHHTTPAdapter
from docker.transport.sshconn import SSHConnectionPool
from docker.types import DeviceRequest

from pytest_ppsweep.cluster.base import CommandResult, HostError
from pytest_ppsweep.cluster.labels import CONFIG_LABEL, NODE_RANK_LABEL, RUN_LABEL
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.ssh import HostConnectionError, SshSettings, describe_connect_error
from pytest_ppsweep.folder.runfolder import docker_run_name
from pytest_ppsweep.matrix.model import Cluster
from pytest_ppsweep.redact import redact, redact_argv, redact_env

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.rankspec import RankSpec

DEFAULT_SHM_SIZE = "32g"
# the label of a throwaway container (run_once: the flag check, the versions): not a rank
METADATA_LABEL = "ppsweep.metadata"
_NAME_SAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
_CONNECT_ERRORS = (paramiko.SSHException, OSError, EOFError)


class _FreshSshPool(SSHConnectionPool):  # type: ignore[misc]
    """The SDK's pool reuses an HTTP connection (an SSH channel running ``docker system
    dial-stdio``) without checking it; one the far end has closed is replaced here."""

    def _get_conn(self, timeout: float | None) -> Any:
        conn = super()._get_conn(timeout)
        chan = getattr(conn, "sock", None)
        if chan is not None and (chan.closed or chan.eof_received or chan.exit_status_ready()):
            conn.close()
            return self._new_conn()
        return conn


class _VerifiedSshAdapter(SSHHTTPAdapter):  # type: ignore[misc]
    """The SDK's SSH transport, logged in with the cluster's key and known_hosts."""

    def __init__(self, address: str, settings: SshSettings, timeout: int) -> None:
        self._address = address
        self._settings = settings
        super().__init__(
            f"ssh://{settings.user}@{address}:{settings.port}", timeout=timeout, max_pool_size=16
        )

    def _create_paramiko_client(self, base_url: str) -> None:
        self.ssh_client = self._settings.paramiko_client()
        self.ssh_params = {
            "hostname": self._address,
            "port": self._settings.port,
            "username": self._settings.user,
            "timeout": self._settings.connect_timeout,
            **self._settings.connect_kwargs(),
        }

    def get_connection(self, url: str, proxies: Any = None) -> Any:
        with self.pools.lock:
            transport = self.ssh_client.get_transport()
            if transport is None or not transport.is_active():
                # the SSH connection itself dropped: reconnect, forget pools bound to it
                self.pools.clear()
                self._connect()
            pool = self.pools.get(url)
            if pool is None:
                pool = _FreshSshPool(
                    ssh_client=self.ssh_client,
                    timeout=self.timeout,
                    maxsize=self.max_pool_size,
                    host=self.ssh_host,
                )
                self.pools[url] = pool
            return pool


class _SshApiClient(docker.APIClient):  # type: ignore[misc]
    """APIClient whose transport is a :class:`_VerifiedSshAdapter` (the SDK has no argument for
    a custom adapter; this mounts it exactly where ``base_url="ssh://..."`` would)."""

    def __init__(self, adapter: _VerifiedSshAdapter, timeout: int) -> None:
        # a tcp base_url with an explicit version makes no connection here
        super().__init__(base_url="tcp://127.0.0.1:9", version="1.41", timeout=timeout)
        self._custom_adapter = adapter
        self.mount("http+docker://ssh", adapter)
        self._unmount("http://", "https://")
        self.base_url = "http+docker://ssh"
        self._version = self._retrieve_server_version()


class _Client(docker.DockerClient):  # type: ignore[misc]
    def __init__(self, api: docker.APIClient) -> None:
        self.api = api


def connect_docker(name: str, address: str, settings: SshSettings, timeout: int = 120) -> Any:
    """A new docker client of one node (``ssh://user@address``); a
    :class:`~pytest_ppsweep.cluster.registry.Registry` shares one per node."""
    try:
        adapter = _VerifiedSshAdapter(address, settings, timeout)
    except _CONNECT_ERRORS as exc:
        raise HostConnectionError(
            f"host {name} ({address}): SSH connection as {settings.user} for docker failed: "
            f"{describe_connect_error(exc, settings)}"
        ) from None
    try:
        return _Client(_SshApiClient(adapter, timeout))
    except (DockerException, *_CONNECT_ERRORS) as exc:
        adapter.close()
        raise HostError(
            f"host {name} ({address}): no docker daemon answers over SSH "
            f"(`docker system dial-stdio` as {settings.user}): {exc}"
        ) from None


def shared_client(
    registry: Registry, name: str, address: str, settings: SshSettings, timeout: int = 120
) -> Any:
    """The registry's docker client of one node (one per node and settings)."""
    client: Any = registry.shared(
        ("docker", address, settings), lambda: connect_docker(name, address, settings, timeout)
    )
    return client


class Daemons(Protocol):
    """Where each node's dockerd is: what differs between Docker over SSH and Docker here."""

    def client(self, name: str, address: str) -> Any:
        """The docker client of the node ``name`` at ``address``."""
        ...

    def target(self, address: str) -> str:
        """The ``DOCKER_HOST`` of that node, for the ``docker run`` line written beside a log."""
        ...


class SshDaemons:
    """Each node's dockerd over ``ssh://`` with the cluster's key and host-key checking."""

    def __init__(self, settings: SshSettings, registry: Registry) -> None:
        self.settings = settings
        self.registry = registry

    def client(self, name: str, address: str) -> Any:
        return shared_client(self.registry, name, address, self.settings)

    def target(self, address: str) -> str:
        return f"ssh://{self.settings.user}@{address}"


def container_name(labels: Mapping[str, str]) -> str:
    parts = [
        "ppsweep",
        labels.get(RUN_LABEL, ""),
        labels.get(CONFIG_LABEL, ""),
        f"node{labels.get(NODE_RANK_LABEL, '')}",
    ]
    name = _NAME_SAFE.sub("_", "-".join(p for p in parts if p))
    return name[:200]


def device_mapping(device: str) -> str:
    """``/dev/infiniband`` → ``/dev/infiniband:/dev/infiniband:rwm``; ``host:container[:perm]``
    is kept."""
    parts = device.split(":")
    if len(parts) == 1:
        return f"{device}:{device}:rwm"
    if len(parts) == 2:
        return f"{parts[0]}:{parts[1]}:rwm"
    return device


def device_host_path(device: str) -> str:
    return device.split(":", 1)[0]


def mount_spec(mount: str) -> tuple[str, dict[str, str]]:
    """``host:container[:ro|rw]`` (or just ``path``) → a docker-py volume entry."""
    parts = mount.split(":")
    host = parts[0]
    bind = parts[1] if len(parts) > 1 and parts[1] else host
    mode = parts[2] if len(parts) > 2 else "rw"
    return host, {"bind": bind, "mode": mode}


def volumes_of(cluster: Cluster, model_path: str) -> dict[str, dict[str, str]]:
    """A rank container's bind mounts: the model path read-only, the cluster's ``mounts``."""
    volumes: dict[str, dict[str, str]] = {}
    if model_path:
        volumes[model_path] = {"bind": model_path, "mode": "ro"}
    for mount in cluster.mounts:
        host, bind = mount_spec(mount)
        volumes[host] = bind
    return volumes


def container_options(cluster: Cluster, model_path: str, devices: Sequence[str]) -> list[str]:
    """A rank container's options as ``docker run`` writes them (what ``run_kwargs`` gives
    docker-py): host network and IPC, the shared memory, every GPU, the sweep's ``devices``
    and the bind mounts. The docker run line beside a rank's log and the dry run print them."""
    args = ["--init", "--network", "host", "--ipc", "host", "--shm-size",
            cluster.shm_size or DEFAULT_SHM_SIZE, "--gpus", "all"]
    for d in devices:
        args += ["--device", device_mapping(d)]
    for host, bind in volumes_of(cluster, model_path).items():
        args += ["-v", f"{host}:{bind['bind']}:{bind['mode']}"]
    return args


class DockerRank:
    """One rank's container: poll, stop (and remove), its log streamed into ``log_path``."""

    def __init__(self, container: Any, host_name: str, node_rank: int, log_path: Path) -> None:
        self.container = container
        self.name = str(container.name)
        self.host_name = host_name
        self.node_rank = node_rank
        self.log_path = log_path
        self._rc: int | None = None
        self._lock = threading.Lock()
        self._removed = False
        self._reopening = False  # the log stream broke and is being reopened
        self._thread = threading.Thread(
            target=self._stream, name=f"ppsweep-logs-{host_name}", daemon=True
        )
        self._thread.start()

    def __repr__(self) -> str:
        return f"DockerRank({self.host_name}, {self.name})"

    def _stream(self) -> None:
        """Copy the container's log into ``log_path`` until the container ends. A stream that
        breaks while the container still runs (the SSH connection dropped, dockerd restarted)
        is reopened and its first ``copied`` bytes skipped (docker replays the log from the
        start), so the local copy stays byte-for-byte the container's log; after 30 failed
        reopenings (about 30 s) a ``log stream … lost`` line says so."""
        copied, failures = 0, 0
        with self.log_path.open("ab") as out:
            while not self._removed:
                error = "the stream ended while the container runs"
                try:
                    skip = copied
                    stream = self.container.logs(stream=True, follow=True)
                    self._reopening = False  # a live stream again: it ends when the rank does
                    for chunk in stream:
                        if skip:
                            if len(chunk) <= skip:
                                skip -= len(chunk)
                                continue
                            chunk, skip = chunk[skip:], 0
                        out.write(chunk)
                        out.flush()
                        copied += len(chunk)
                        failures = 0
                except (DockerException, OSError, paramiko.SSHException) as exc:
                    error = str(exc)
                self._reopening = True  # meanwhile poll() asks the daemon
                if self._removed:
                    return
                state = self._state()
                if state in ("exited", "dead", "removed"):
                    break  # follow ended because the container did
                failures += 1
                if failures > 30:
                    out.write(f"[ppsweep] log stream from {self.host_name} lost: {error}\n"
                              .encode())
                    out.flush()
                    return
                time.sleep(1.0)  # a bounded backoff before reopening, not a synchronisation
        # follow ends when the container stops
        with contextlib.suppress(DockerException, OSError, paramiko.SSHException):
            self._rc = int(self.container.wait(timeout=30)["StatusCode"])

    def _state(self) -> str | None:
        """The container's status as its daemon says (``removed`` when gone), None when the
        daemon cannot be asked."""
        try:
            self.container.reload()
        except NotFound:
            return "removed"
        except (DockerException, OSError, paramiko.SSHException):
            return None
        return str(self.container.attrs.get("State", {}).get("Status", ""))

    def poll(self) -> int | None:
        if self._rc is not None or self._removed:
            return self._rc
        if self._thread.is_alive() and not self._reopening:
            return None
        # the stream ended without a status: ask the daemon
        try:
            self.container.reload()
        except NotFound:
            self._rc = -9  # removed behind our back (reaped, or `docker rm -f` by hand)
            return self._rc
        except (DockerException, OSError, paramiko.SSHException):
            return None
        state = self.container.attrs.get("State", {})
        if state.get("Status") in ("exited", "dead"):
            self._rc = int(state.get("ExitCode", -1))
        return self._rc

    def stop(self, grace_s: float = 5.0) -> int | None:
        """Stop (SIGTERM through tini, SIGKILL after ``grace_s``) and remove; idempotent."""
        with self._lock:
            if self._removed:
                return self._rc
            try:
                self.container.stop(timeout=max(1, round(grace_s)))
                if self._rc is None:
                    self._rc = int(self.container.wait(timeout=30)["StatusCode"])
            except NotFound:
                pass
            except (DockerException, OSError, paramiko.SSHException):
                pass  # remove(force=True) below kills it
            self._thread.join(timeout=10)
            try:
                self.container.remove(force=True)
            except NotFound:
                pass
            except (DockerException, OSError, paramiko.SSHException) as exc:
                raise HostError(
                    f"host {self.host_name}: container {self.name} could not be removed: {exc}"
                ) from None
            self._removed = True
            return self._rc


class DockerLauncher:
    """Starts each rank as a container on its node (``launcher = "docker"``), through the
    nodes' dockerd that ``daemons`` reaches (over SSH, or this machine's)."""

    def __init__(
        self,
        cluster: Cluster,
        image: str = "",
        model_path: str = "",
        devices: Sequence[str] = (),
        registry: Registry | None = None,
        daemons: Daemons | None = None,
    ) -> None:
        self.cluster = cluster
        self.image = image
        self.model_path = model_path
        self.devices = tuple(devices)
        self.registry = registry if registry is not None else Registry()
        # the nodes' dockerd: over ssh:// unless the backend says where (Docker here)
        self.daemons: Daemons = daemons if daemons is not None else SshDaemons(
            SshSettings.from_cluster(cluster), self.registry)

    def client(self, name: str, address: str) -> Any:
        return self.daemons.client(name, address)

    def run_kwargs(self, spec: RankSpec, labels: Mapping[str, str]) -> dict[str, Any]:
        """Everything ``containers.run`` gets besides image and command."""
        volumes = self.volumes()
        return {
            "name": container_name(labels),
            "labels": {k: str(v) for k, v in labels.items()},
            "detach": True,
            "init": True,
            "network_mode": "host",
            "ipc_mode": "host",
            "shm_size": self.cluster.shm_size or DEFAULT_SHM_SIZE,
            "device_requests": [DeviceRequest(count=-1, capabilities=[["gpu"]])],
            "devices": [device_mapping(d) for d in self.devices],
            "environment": dict(spec.env),
            "volumes": volumes,
        }

    def volumes(self) -> dict[str, dict[str, str]]:
        """The ranks' bind mounts: the model path read-only, the cluster's ``mounts``."""
        return volumes_of(self.cluster, self.model_path)

    def run_once(self, host: str, address: str, argv: Sequence[str], env: Mapping[str, str],
                 timeout: float) -> CommandResult:
        """``docker run --rm IMAGE argv`` on one node, as a rank's container gets it (the
        image's entrypoint, the ranks' mounts and environment) but without network, GPUs or
        devices: a short look inside the image (the server's parser). Created, not run: a
        missing image is an error, never a pull. The container is removed in every case."""
        client = self.client(host, address)
        try:
            container = client.containers.create(
                self.image, list(argv), environment=dict(env), volumes=self.volumes(),
                labels={METADATA_LABEL: "1"}, network_mode="none")
        except ImageNotFound:
            raise HostError(f"host {host}: image {self.image} is not present") from None
        except (DockerException, *_CONNECT_ERRORS) as exc:
            raise HostError(f"host {host}: cannot create a container of {self.image}: "
                            f"{exc}") from None
        try:
            container.start()
            status = int(container.wait(timeout=timeout)["StatusCode"])
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
        except (DockerException, *_CONNECT_ERRORS) as exc:
            raise HostError(f"host {host}: `{shlex.join(argv[:2])} …` in {self.image} did not "
                            f"finish (waited at most {timeout:.0f} s): {exc}") from None
        finally:
            with contextlib.suppress(DockerException, *_CONNECT_ERRORS):
                container.remove(force=True)
        return CommandResult(host, tuple(argv), status, out, err)

    def docker_run_line(self, spec: RankSpec, labels: Mapping[str, str]) -> str:
        """The equivalent ``docker run`` command, secret values redacted."""
        kw = self.run_kwargs(spec, labels)
        args = ["docker", "run", "-d", "--name", kw["name"]]
        for k, v in kw["labels"].items():
            args += ["--label", f"{k}={v}"]
        args += container_options(self.cluster, self.model_path, self.devices)
        for k, v in sorted(redact_env(kw["environment"]).items()):
            args += ["-e", f"{k}={v}"]
        args += [self.image, *redact_argv(spec.argv)]
        return str(redact(shlex.join(args)))

    def write_docker_run(self, spec: RankSpec, labels: Mapping[str, str], log_path: Path) -> Path:
        path = log_path.parent / docker_run_name(spec.node_rank)
        target = self.daemons.target(spec.address)
        path.write_text(
            f"# node{spec.node_rank} ({spec.host}): DOCKER_HOST={target}\n"
            f"{self.docker_run_line(spec, labels)}\n",
            encoding="utf-8",
        )
        return path

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> DockerRank:
        if not self.image:
            raise HostError(
                f"cluster {self.cluster.name!r}: the docker launcher needs an image "
                "([sweep] image or --ppsweep-image)"
            )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.write_docker_run(spec, labels, log_path)
        client = self.client(spec.host, spec.address)
        kw = self.run_kwargs(spec, labels)
        kw.pop("detach")
        try:
            # create, not run: run would try to pull a missing image from a registry
            container = self._create(client, spec, kw)
            container.start()
        except ImageNotFound:
            raise HostError(f"host {spec.host}: image {self.image} is not present") from None
        except APIError as exc:
            # a container that failed to start stays "Created": do not leave it behind
            with contextlib.suppress(DockerException):
                client.containers.get(kw["name"]).remove(force=True)
            raise HostError(
                f"host {spec.host}: container {kw['name']} did not start: {exc.explanation or exc}"
            ) from None
        return DockerRank(container, spec.host, spec.node_rank, log_path)

    def _create(self, client: Any, spec: RankSpec, kw: dict[str, Any]) -> Any:
        try:
            return client.containers.create(self.image, list(spec.argv), **kw)
        except APIError as exc:
            if exc.status_code != 409:  # 409: the name is taken
                raise
        _remove_stale(client, kw["name"], spec.host)
        return client.containers.create(self.image, list(spec.argv), **kw)


def _remove_stale(client: Any, name: str, host: str) -> None:
    """A container of ours with the same name (an earlier attempt of this run) is removed;
    a foreign one is an error, never touched."""
    try:
        old = client.containers.get(name)
    except NotFound:
        return
    if RUN_LABEL not in (old.labels or {}):
        raise HostError(
            f"host {host}: a container named {name} exists and is not ppsweep's; remove or "
            "rename it"
        )
    old.remove(force=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            client.containers.get(name)
        except NotFound:
            return
        time.sleep(0.1)
