"""SshHost against real sshd on the namespace hosts: keys, host keys, quoting, sudo, errors."""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from support.remote import TestHosts

from pytest_ppsweep.cluster.backends import host_for
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.ssh import HostConnectionError, SshHost, SshSettings, on_all
from pytest_ppsweep.matrix.model import Cluster, Host


@pytest.fixture
def settings(test_hosts: TestHosts) -> SshSettings:
    return SshSettings(key_filename=test_hosts.ssh_key, known_hosts=test_hosts.known_hosts)


@pytest.fixture
def hosts(test_hosts: TestHosts, settings: SshSettings) -> list[SshHost]:
    return [SshHost(name, address, settings) for name, address in test_hosts.hosts]


def test_commands_run_on_every_node_at_once(hosts: list[SshHost]) -> None:
    for h in hosts:
        h.connection()  # connect first: this measures the commands, not the handshakes
    t0 = time.monotonic()
    results = on_all(hosts, lambda h: h.run(["sh", "-c", "sleep 1; hostname"]))
    took = time.monotonic() - t0
    assert [r.stdout.strip() for r in results] == ["h601", "h602", "h603", "h604"]
    assert all(r.ok and r.host == h.name for r, h in zip(results, hosts, strict=True))
    assert took < 2.5, f"4 × `sleep 1` took {took:.1f} s: not concurrent"


def test_every_argument_is_quoted(hosts: list[SshHost]) -> None:
    tricky = ["a b", "it's", '"dq"', "$HOME", "`id`", "$(id)", "; rm -rf /tmp/x", "*", "\\n", ""]
    res = hosts[0].run(["printf", "%s\\n", *tricky])
    assert res.ok
    assert res.stdout.split("\n")[:-1] == tricky


def test_exit_status_and_stderr_are_returned(hosts: list[SshHost]) -> None:
    res = hosts[1].run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (res.exit_status, res.stdout, res.stderr, res.ok) == (7, "out\n", "err\n", False)
    assert res.command == ("sh", "-c", "echo out; echo err >&2; exit 7")


def test_unknown_host_key_is_refused_unless_opted_out(
    test_hosts: TestHosts, settings: SshSettings, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostConnectionError) as err:
        SshHost("h601", "10.200.0.101", replace(settings, known_hosts=str(empty))).run(["true"])
    assert "host h601 (10.200.0.101)" in str(err.value)
    assert f"host key not in {empty}" in str(err.value) and "verify_host_keys" in str(err.value)
    # the explicit opt-out of the matrix (verify_host_keys = false)
    opted_out = replace(settings, known_hosts=str(empty), verify_host_keys=False)
    assert SshHost("h601", "10.200.0.101", opted_out).run(["hostname"]).stdout == "h601\n"
    assert empty.read_text() == "", "an unverified key must not be written to known_hosts"


def test_changed_host_key_is_a_mismatch(
    test_hosts: TestHosts, settings: SshSettings, tmp_path: Path
) -> None:
    # h602's key recorded for h601's address: what a reinstalled host or a spoofer looks like
    lines = Path(test_hosts.known_hosts).read_text().splitlines()
    h602_key = next(line for line in lines if line.startswith("10.200.0.102 ")).split(" ", 1)[1]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"10.200.0.101 {h602_key}\n")
    with pytest.raises(HostConnectionError, match=r"host h601 \(10\.200\.0\.101\).*mismatch"):
        SshHost("h601", "10.200.0.101", replace(settings, known_hosts=str(wrong))).run(["true"])


def test_unreachable_host_and_bad_key_are_connection_errors(
    settings: SshSettings, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    with pytest.raises(HostConnectionError, match=r"host h699 \(10\.200\.0\.199\).*no answer"):
        SshHost("h699", "10.200.0.199", replace(settings, connect_timeout=2)).run(["true"])
    assert time.monotonic() - t0 < 10
    other_key = tmp_path / "id_other"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True
    )
    with pytest.raises(HostConnectionError, match=r"host h601 .*authentication as 'root'"):
        SshHost("h601", "10.200.0.101", replace(settings, key_filename=str(other_key))).run(
            ["true"]
        )


def test_timeout_is_a_host_error(hosts: list[SshHost]) -> None:
    hosts[0].connection()
    t0 = time.monotonic()
    with pytest.raises(HostError) as err:
        hosts[0].run(["sleep", "30"], timeout=1)
    assert "host h601 (10.200.0.101): sleep 30 did not finish within 1 s" in str(err.value)
    assert time.monotonic() - t0 < 10
    assert hosts[0].run(["true"]).ok  # the connection is still usable


def test_sudo_with_a_password_file_never_shows_the_password(
    test_hosts: TestHosts, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)  # paramiko, invoke and fabric log at DEBUG
    sudo = SshSettings(
        user=test_hosts.sudo_user,
        key_filename=test_hosts.ssh_key,
        known_hosts=test_hosts.known_hosts,
        sudo_password_file=test_hosts.sudo_password_file,
    )
    host = SshHost("h602", "10.200.0.102", sudo)
    assert host.run(["id", "-u"]).stdout == "0\n"  # through sudo
    assert host.run(["id", "-un"], sudo=False).stdout == f"{test_hosts.sudo_user}\n"
    # a command that echoes its standard input must not get the password line
    assert host.run(["cat"]).stdout == ""
    password = test_hosts.password
    assert password not in caplog.text
    # a wrong password: sudo fails, and the wrong password shows nowhere either
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password-4711\n")
    res = SshHost("h602", "10.200.0.102", replace(sudo, sudo_password_file=str(wrong))).run(
        ["id", "-u"]
    )
    assert not res.ok and "incorrect password" in res.stderr
    assert "not-the-password-4711" not in res.stdout + res.stderr + caplog.text
    missing = replace(sudo, sudo_password_file=str(tmp_path / "nope"))
    with pytest.raises(HostError, match=r"sudo_password_file .*nope: cannot read it"):
        SshHost("h602", "10.200.0.102", missing).run(["true"])


def test_host_for_gives_one_shared_ssh_host_per_node(test_hosts: TestHosts) -> None:
    cluster = Cluster(
        name="ns",
        kind="ssh",
        launcher="process",
        hosts=tuple(Host(address=a, name=n) for n, a in test_hosts.hosts),
        gpus_per_node=8,
        server_module="pytest_ppsweep.sim",
        port=30000,
        dist_init_port=20000,
        nvidia_smi=(),
        ssh_key=test_hosts.ssh_key,
        known_hosts=test_hosts.known_hosts,
    )
    with Registry() as registry:
        first = host_for(cluster, cluster.hosts[2], registry)
        assert isinstance(first, SshHost) and first is host_for(cluster, cluster.hosts[2], registry)
        assert first.run(["hostname"]).stdout == "h603\n"
