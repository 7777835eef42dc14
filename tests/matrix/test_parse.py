"""Every way a sweep file can be wrong is refused before anything launches, naming file,
key, what was expected and what was found."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.matrices import replace_once, seed_text

from pytest_ppsweep.matrix.model import MatrixError
from pytest_ppsweep.matrix.parse import load

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "test_matrix" / "ppsweep.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    return path


def seed_with(tmp_path: Path, old: str, new: str) -> Path:
    """The seed sweep, self-contained, with its one ``old`` edited into ``new``."""
    return write(tmp_path, replace_once(seed_text(), old, new))


def refused(path: Path, *patterns: str, cluster: str | None = None) -> str:
    with pytest.raises(MatrixError) as info:
        load(path, cluster)
    msg = str(info.value)
    assert str(path) in msg
    for p in patterns:
        assert re.search(p, msg), f"{p!r} not in {msg!r}"
    return msg


def test_seed_matrix_is_the_seeds_sweep() -> None:
    sweep = load(SEED)
    assert [c.id for c in sweep.configs] == [
        "pp1-tp32-ep4",
        "pp2-tp16-ep4",
        "pp4-tp8-ep4",
        "pp8-tp4-ep4",
        "pp16-tp2-ep2",
    ]
    assert sweep.baseline == "pp1-tp32-ep4"
    assert sweep.image == "local/sglang:kimi-k3-sm120-flashinfer-mxfp4-phase5"
    assert sweep.model_path == "/data/hf_models/Kimi-K3"
    assert sweep.server == {
        "moe_runner_backend": "flashinfer_mxfp4",
        "moe_a2a_backend": "none",
        "chunked_prefill_size": 8192,
        "disable_radix_cache": True,
        "mem_fraction_static": 0.88,
    }
    assert sweep.env["NCCL_SOCKET_IFNAME"] == "bond0"
    assert sweep.env["GLOO_SOCKET_IFNAME"] == "bond0"
    assert sweep.env["NCCL_IB_HCA"] == "mlx5_0,mlx5_1,mlx5_2,mlx5_3"
    assert sweep.env["NCCL_IB_GID_INDEX"] == "3"
    assert sweep.devices == ("/dev/infiniband",)
    pp16 = sweep.config("pp16-tp2-ep2")
    assert pp16.server == {"disable_decode_cuda_graph": True, "watchdog_timeout": 3000000}
    w = sweep.workload
    assert (w.dataset, w.input_len, w.output_len, w.range_ratio) == ("random-ids", 16384, 1, 1.0)
    assert (w.concurrency, w.num_requests, w.repeats) == ((8, 16), 40, 3)
    local, pro = sweep.clusters["local"], sweep.clusters["pro6000"]
    assert [h.address for h in local.hosts] == [f"127.0.6.{i}" for i in range(1, 5)]
    assert (local.kind, local.gpus_per_node, local.server_module) == (
        "local",
        8,
        "pytest_ppsweep.sim",
    )
    assert [h.name for h in pro.hosts] == ["601", "602", "603", "604"]
    assert (pro.kind, pro.launcher, pro.hosts[0].address) == ("ssh", "docker", "174.1.60.1")
    assert sweep.default_cluster == "local"
    load(SEED, "pro6000")  # 4 × 8 as well


def test_world_size_must_match_cluster(tmp_path: Path) -> None:
    path = seed_with(tmp_path, "pp = 8\ntp = 4", "pp = 8\ntp = 2")
    refused(path, r"configs\[3\]", r"expected PP × TP = 32", r"found 8 × 2 = 16", "'local'")


def test_tp_not_divisible_by_ep(tmp_path: Path) -> None:
    path = seed_with(tmp_path, "pp = 4\ntp = 8", "pp = 4\ntp = 8\nep = 3")
    refused(path, r"configs\[2\]\.ep", r"TP % EP == 0", r"found TP 8 % EP 3 = 2")


def test_ep_larger_than_tp(tmp_path: Path) -> None:
    path = seed_with(tmp_path, "pp = 16\ntp = 2", "pp = 16\ntp = 2\nep = 4")
    refused(path, r"configs\[4\]\.ep", r"EP ≤ TP", r"found EP 4 > TP 2")


def test_unknown_key_has_did_you_mean(tmp_path: Path) -> None:
    path = seed_with(tmp_path, "num_requests = 40", "num_request = 40")
    refused(path, r"unknown key 'workload\.num_request'", r"did you mean 'num_requests'")


def test_unknown_top_level_key(tmp_path: Path) -> None:
    # ("workloads" is a key now: named workloads, matrix/axes.py)
    path = seed_with(tmp_path, "[workload]", "[servers]\nx = 1\n[workload]")
    refused(path, r"unknown key 'servers'", r"did you mean 'server'")


def test_wrong_type(tmp_path: Path) -> None:
    path = seed_with(tmp_path, "input_len = 16384", 'input_len = "16K"')
    refused(path, r"'workload\.input_len'", r"expected an integer", r"found str '16K'")


def test_duplicate_configuration(tmp_path: Path) -> None:
    path = seed_with(
        tmp_path, "[[configs]]\npp = 2", "[[configs]]\npp = 1\ntp = 32\n\n[[configs]]\npp = 2"
    )
    refused(path, r"duplicate configuration pp1-tp32-ep4", r"configs\[0\]")


def test_baseline_not_in_sweep(tmp_path: Path) -> None:
    path = seed_with(tmp_path, 'baseline = "pp1"', 'baseline = "pp32"')
    refused(path, r"'sweep\.baseline'", r"found 'pp32'", r"pp8-tp4-ep4")


def test_empty_sweep(tmp_path: Path) -> None:
    text = seed_text()
    start = text.index("[[configs]]")
    end = text.index("[workload]")
    path = write(tmp_path, text[:start] + text[end:])
    refused(path, r"'configs'", r"at least one", r"found none")


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("concurrency = [8, 16]", "concurrency = [8, 0]", "workload.concurrency"),
        ("concurrency = [8, 16]", "concurrency = [-1]", "workload.concurrency"),
        ("num_requests = 40", "num_requests = 0", "workload.num_requests"),
        ("input_len = 16384", "input_len = 0", "workload.input_len"),
        ("output_len = 1", "output_len = -5", "workload.output_len"),
        ("repeats = 3", "repeats = 0", "workload.repeats"),
    ],
)
def test_non_positive_numbers(tmp_path: Path, old: str, new: str, key: str) -> None:
    path = seed_with(tmp_path, old, new)
    refused(path, re.escape(f"'{key}'"), r"expected (integers|a value) ≥ 1", r"found")


def test_unknown_cluster(tmp_path: Path) -> None:
    refused(SEED, r"unknown cluster 'h100'", r"local, local-b, pro6000", cluster="h100")


def test_unknown_cluster_names_the_option_and_suggests() -> None:
    msg = refused(SEED, r"^--ppsweep-cluster: unknown cluster 'locl' \(did you mean 'local'\?\); "
                  r"expected one of the clusters of .*: local, local-b, pro6000$", cluster="locl")
    assert not msg.startswith(str(SEED)), "the name came from the command line, not the file"


def test_plugin_owned_flag_in_server(tmp_path: Path) -> None:
    path = seed_with(
        tmp_path, "mem_fraction_static = 0.88", "mem_fraction_static = 0.88\ntp_size = 8"
    )
    refused(path, r"'server\.tp_size'", r"set by the plugin")


def test_owned_flags_are_the_sweeps_engines_own(tmp_path: Path) -> None:
    # vLLM takes `headless` from the layout; SGLang has no such flag of its own, so a SGLang
    # sweep's [server] is not refused for it here (the engine's own parser judges it), while a
    # vLLM sweep is, with vLLM's reason.
    sglang = seed_with(tmp_path, "mem_fraction_static = 0.88",
                       "mem_fraction_static = 0.88\nheadless = true")
    assert load(sglang).server["headless"] is True
    text = sglang.read_text()
    vllm = write(tmp_path, text.replace("[sweep]\n", '[sweep]\nengine = "vllm"\n', 1))
    refused(vllm, r"'server\.headless'", r"set by the plugin")


def test_not_toml(tmp_path: Path) -> None:
    refused(write(tmp_path, "[sweep\nname="), r"not valid TOML")


def test_missing_file(tmp_path: Path) -> None:
    refused(tmp_path / "nope.toml", r"not found")


def test_exact_selector_never_matches_substring() -> None:
    sweep = load(SEED)
    assert [c.id for c in sweep.configs if c.matches("pp1")] == ["pp1-tp32-ep4"]
    assert [c.id for c in sweep.configs if c.matches("pp16")] == ["pp16-tp2-ep2"]
    assert [c.id for c in sweep.configs if c.matches("pp8-tp4")] == ["pp8-tp4-ep4"]
    assert not [c for c in sweep.configs if c.matches("pp")]


def test_health_stall_has_a_default_a_value_and_a_bound(tmp_path: Path) -> None:
    assert load(SEED).health_stall_s == 30.0
    path = seed_with(tmp_path, "boot_timeout_s", "health_stall_s = 12\nboot_timeout_s")
    assert load(path).health_stall_s == 12.0
    bad = seed_with(tmp_path, "boot_timeout_s", "health_stall_s = 0\nboot_timeout_s")
    refused(bad, re.escape("'sweep.health_stall_s'"), r"expected a value ≥ 0.1", r"found")


def test_the_engine_is_sglang_unless_the_sweep_names_another(tmp_path: Path) -> None:
    """``[sweep] engine`` names the serving engine (engine/engines.py): SGLang by default, on
    the sweep and each of its points, whose ids it leaves as they were."""
    sweep = load(SEED)
    assert sweep.engine == "sglang" and {c.engine for c in sweep.configs} == {"sglang"}
    named = load(seed_with(tmp_path, "[sweep]\n", '[sweep]\nengine = "sglang"\n'))
    assert [c.id for c in named.configs] == [c.id for c in sweep.configs]
    assert named.engine == "sglang"


def test_an_unknown_engine_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    path = seed_with(tmp_path, "[sweep]\n", '[sweep]\nengine = "sglnag"\n')
    refused(path, r"key 'sweep\.engine'", r"expected one of sglang", r"found 'sglnag'",
            r"did you mean 'sglang'")
