"""redact.py is the one place that hides secrets; every kind it knows, and the writers that use
it (rank command lines, docker run lines, manifests, the SSH host's output)."""

from __future__ import annotations

import pytest

from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.redact import (
    REDACTED,
    SCRUBBED,
    is_secret_key,
    redact,
    redact_argv,
    redact_env,
    redact_toml,
    scrub,
)


@pytest.mark.parametrize("key", [
    "api_key", "admin_api_key", "ssl_keyfile_password", "hf_token",  # server-info fields
    "HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "AWS_SECRET", "MY_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN", "sudo_password_file",  # environment names, any case
])
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["model_path", "tp_size", "max_total_tokens", "HOME",
                                 "CUDA_VISIBLE_DEVICES", "PPSWEEP_RUN", "token_budget"])
def test_ordinary_keys(key: str) -> None:
    assert not is_secret_key(key)


def test_server_info_fields_nested_and_null() -> None:
    info = {"api_key": "sk-1", "admin_api_key": None, "hf_token": "", "tp_size": 4,
            "nested": {"ssl_keyfile_password": "pw", "list": [{"x_api_key": "k"}, "plain"]}}
    assert redact(info) == {
        "api_key": REDACTED, "admin_api_key": None, "hf_token": "", "tp_size": 4,
        "nested": {"ssl_keyfile_password": REDACTED, "list": [{"x_api_key": REDACTED}, "plain"]},
    }
    assert info["api_key"] == "sk-1"  # a copy


@pytest.mark.parametrize(("text", "want"), [
    ("serve --api-key sk-1 --tp 4", f"serve --api-key {REDACTED} --tp 4"),
    ("serve --admin-api-key=adm --tp 4", f"serve --admin-api-key={REDACTED} --tp 4"),
    ("--ssl-keyfile-password  pw", f"--ssl-keyfile-password  {REDACTED}"),
    ("--hf-token hf_x", f"--hf-token {REDACTED}"),
    ("--model-path /m --api-keys-are-fine", "--model-path /m --api-keys-are-fine"),
])
def test_flags_in_text(text: str, want: str) -> None:
    assert redact(text) == want


def test_flags_as_argv_tokens() -> None:
    argv = ["python3", "-m", "sglang.launch_server", "--api-key", "sk-1", "--tp", "4",
            "--admin-api-key=adm", "--model-path", "/m"]
    assert redact_argv(argv) == ["python3", "-m", "sglang.launch_server", "--api-key", REDACTED,
                                 "--tp", "4", f"--admin-api-key={REDACTED}", "--model-path", "/m"]


def test_env_names() -> None:
    env = {"HF_TOKEN": "hf_x", "OPENAI_API_KEY": "sk", "DB_PASSWORD": "pw", "APP_SECRET": "s",
           "EMPTY_TOKEN": "", "NCCL_DEBUG": "WARN"}
    assert redact_env(env) == {"HF_TOKEN": REDACTED, "OPENAI_API_KEY": REDACTED,
                               "DB_PASSWORD": REDACTED, "APP_SECRET": REDACTED,
                               "EMPTY_TOKEN": "", "NCCL_DEBUG": "WARN"}


def test_toml_lines() -> None:
    text = ('[sweep]\nname = "s"\n[server]\napi_key = "sk-1"\nhf_token="hf"\n'
            'admin_api_key = ""\nmodel_path = "/m"\n')
    assert redact_toml(text) == (f'[sweep]\nname = "s"\n[server]\napi_key = "{REDACTED}"\n'
                                 f'hf_token="{REDACTED}"\nadmin_api_key = ""\nmodel_path = "/m"\n')


def test_scrubbed_secret_text() -> None:
    out = "[sudo] password for ci: hunter2\nok hunter2\n"
    assert scrub(out, "hunter2") == f"[sudo] password for ci: {SCRUBBED}\nok {SCRUBBED}\n"
    assert scrub(out, "") == out  # no secret: nothing to hide


def test_the_writers_go_through_it() -> None:
    spec = RankSpec(0, "n0", "127.0.0.1",
                    ("python3", "-m", "sglang.launch_server", "--api-key", "sk-1", "--tp", "4"),
                    {"HF_TOKEN": "hf_x", "NCCL_DEBUG": "WARN"})
    line = spec.command_line()
    assert "sk-1" not in line and "hf_x" not in line
    assert f"HF_TOKEN='{REDACTED}'" in line and "NCCL_DEBUG=WARN" in line
    assert f"--api-key {REDACTED} --tp 4" in line
    from pytest_ppsweep import redact as redact_module
    from pytest_ppsweep.cluster import ssh

    assert ssh.scrub is redact_module.scrub  # the SSH host's output: no copy of its own


# -- leaks the secret scan found (tests/reliability/test_no_secret_in_artifacts.py) ------------

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQUJDREVGR0hJSktM\n" \
      "-----END OPENSSH PRIVATE KEY-----\n"


def test_private_key_text_is_redacted_under_any_name() -> None:
    assert redact({"SSH_PRIVATE_KEY": KEY}) == {"SSH_PRIVATE_KEY": REDACTED}  # by name
    assert redact({"DEPLOY": "x" + KEY}) == {"DEPLOY": "x" + REDACTED + "\n"}  # by content
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in str(redact_env({"K": KEY}))


def test_sweep_file_secrets_in_every_toml_string_form() -> None:
    from pytest_ppsweep.redact import redact_toml

    text = ("[env]\nFOO_API_KEY = 'literal-secret-1'\n"
            'X_PASSWORD = """\nmulti-line-secret"""\n'
            'DEPLOY = """\n' + KEY + '"""\n[server]\napi_key = "basic-secret"\n')
    out = redact_toml(text)
    for secret in ("literal-secret-1", "multi-line-secret", "basic-secret",
                   "b3BlbnNzaC1rZXktdjEAAAAA", "QUJDREVGR0hJSktM"):
        assert secret not in out, out


def test_quoted_secret_flag_value_is_redacted_whole() -> None:
    spec = RankSpec(0, "h", "10.0.0.1", ("python", "-m", "x", "--ssl-keyfile-password",
                                         "two words", "--api-key", "it's"), {})
    line = spec.command_line()
    assert "two" not in line and "words" not in line and "it" not in line.split("--api-key")[1]
    assert redact("--api-key 'a b'\"'\"'c' --x 1") == f"--api-key {REDACTED} --x 1"


def test_known_secret_values_are_scrubbed() -> None:
    from pytest_ppsweep.redact import scrub_all, secret_values

    values = secret_values({"server": {"api_key": "sk-123456", "tp_size": 4},
                            "env": [{"HF_TOKEN": "hf_abcdef", "DEPLOY": KEY, "HOME": "/root"}]})
    assert "sk-123456" in values and "hf_abcdef" in values and "/root" not in values
    text = "error: unrecognized arguments: --api-key sk-123456 hf_abcdef QUJDREVGR0hJSktM"
    assert scrub_all(text, values) == "error: unrecognized arguments: --api-key *** *** ***"
