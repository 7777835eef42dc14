"""End-to-end runs of the plugin (pytester, subprocess) against the emulator's real processes."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.matrices import BOOT_FAULT_CONFIGS, one_node_matrix
from support.outcomes import counts, outcomes
from support.paths import REPO
from support.processes import proc_entries, sim_processes
from support.runs import rows, run_dir

from pytest_ppsweep.service.readiness import SUMMARY_LINES

PP1_PP16 = """
[[configs]]
pp = 1
tp = 32

[[configs]]
pp = 16
tp = 2
"""


def run(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*[str(a) for a in args], timeout=600)


def test_small_sweep_passes_and_keeps_the_evidence(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder, reports = sweep_dir(), tmp_path / "reports"
    result = run(pytester, folder, "-v", "--ppsweep-reports", reports)
    # the gate tests are not collected without --ppsweep-compare
    result.assert_outcomes(passed=16, deselected=4)  # + test_outputs_match per layout
    seen = outcomes(result.stdout.str())
    assert seen["test_prefill[pp4-tp8-ep4-c2]"] == "PASSED"
    assert seen["test_prefill[pp8-tp4-ep4-c4]"] == "PASSED"
    run_folder = run_dir(reports)
    results = rows(run_folder / "results.csv")
    assert len(results) == 2 * 2 * 2  # configs × C × repeats
    assert {(r["config_id"], r["concurrency"], r["repeat"]) for r in results} == {
        (c, k, r) for c in ("pp4-tp8-ep4", "pp8-tp4-ep4") for k in ("2", "4") for r in ("1", "2")
    }
    assert all(r["completed"] == "6" and r["failed"] == "0" for r in results)
    assert all(float(r["input_tps"]) > 0 and r["simulated"] == "True" for r in results)
    configs = {r["config_id"]: r for r in rows(run_folder / "configs.csv")}
    assert configs["pp8-tp4-ep4"]["boot_ok"] == "True"
    assert configs["pp8-tp4-ep4"]["topology_ok"] == "True"
    assert configs["pp8-tp4-ep4"]["log_clean"] == "True"
    assert int(configs["pp8-tp4-ep4"]["mem_peak_mib"]) > 0
    # The startup is in emulated seconds like every other time (real boot × time scale 2000);
    # held_s, the cluster time the pool planner reads, stays in real seconds.
    log = (run_folder / "progress.log").read_text()
    for cid, row in configs.items():
        healthy = re.search(rf"{cid}: healthy after ([\d.]+) s real", log)
        assert healthy, f"{cid}: no 'healthy after … s real' line in progress.log"
        real, boot = float(healthy[1]), float(row["boot_s"])
        assert abs(boot - real * 2000) <= 0.05 * 2000 + 1, (cid, boot, real)
        assert f"{cid}: startup {boot:.0f} s emulated ({real:.1f} s real × 2000)" in log
        assert real <= float(row["held_s"]) < boot, row
    startups = [f"{float(r['boot_s']):,.0f} s" for r in configs.values()]
    assert all(f"<td>{s}</td>" in (run_folder / "report.html").read_text() for s in startups)
    for cid in ("pp4-tp8-ep4", "pp8-tp4-ep4"):
        raw = (run_folder / "raw" / cid / "c4-r2.jsonl").read_text().splitlines()
        assert len(raw) == 6 and all(json.loads(line)["ok"] for line in raw)
        assert sorted(p.name for p in (run_folder / "service" / cid).iterdir()) == [
            "launch.sh",
            "node0.log",
            "node1.log",
            "node2.log",
            "node3.log",
        ]
        assert sorted(p.stem for p in (run_folder / "gpu" / cid).iterdir()) == [
            "after",
            "before",
            "cleaned",
            "healthy",
        ]
        info = json.loads((run_folder / "metadata" / f"{cid}.server_info.json").read_text())
        assert info["ppsweep_sim"]["simulated"] is True
    # Each layout booted once, and torn down before the next one booted.
    log = (run_folder / "progress.log").read_text()
    assert log.count("pp4-tp8-ep4: booting on") == 1 and log.count("pp8-tp4-ep4: booting on") == 1
    assert (run_folder / "gpu" / "pp4-tp8-ep4" / "cleaned.csv").stat().st_mtime <= (
        run_folder / "gpu" / "pp8-tp4-ep4" / "before.csv"
    ).stat().st_mtime
    assert (run_folder / "metadata" / "ppsweep.toml").exists()
    report = run_folder / "report.html"
    assert report.exists() and "SIMULATED" in report.read_text()
    result.stdout.fnmatch_lines([f"report: {report}"])


def test_k_collects_and_boots_only_pp8(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    result = run(pytester, sweep_dir(), "-v", "-k", "pp8", "--ppsweep-reports", reports)
    result.assert_outcomes(passed=8, deselected=12)  # 10 by -k, PP8's 2 gate tests: no reference
    assert all("pp8-tp4-ep4" in test for test in outcomes(result.stdout.str()))
    assert sorted(p.name for p in (run_dir(reports) / "service").iterdir()) == ["pp8-tp4-ep4"]


def test_exact_selector_versus_k(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder = sweep_dir(PP1_PP16)
    k = run(
        pytester, folder, "--collect-only", "-q", "-k", "pp1", "--ppsweep-reports", tmp_path / "r1"
    )
    assert "pp16-tp2-ep2" in k.stdout.str()  # -k is a substring match
    exact = run(
        pytester,
        folder,
        "--collect-only",
        "-q",
        "--ppsweep-config",
        "pp1",
        "--ppsweep-reports",
        tmp_path / "r2",
    )
    assert "pp1-tp32-ep4" in exact.stdout.str() and "pp16" not in exact.stdout.str()
    bad = run(pytester, folder, "--ppsweep-config", "pp3", "--ppsweep-reports", tmp_path / "r3")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--ppsweep-config: pp3 matches no configuration*"])


def test_boot_failure_fails_only_its_configuration(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reports = tmp_path / "reports"
    # As on CI, where pytest writes a failure's whole message in the short summary too.
    monkeypatch.setenv("CI", "true")
    result = run(pytester, sweep_dir(BOOT_FAULT_CONFIGS), "-v", "--ppsweep-reports", reports)
    seen = outcomes(result.stdout.str())
    assert {t for t, o in seen.items() if o == "PASSED"} == {
        t for t in seen if "pp4-tp8-ep4" in t and "no_regression" not in t
    }
    assert {o for t, o in seen.items() if "pp8-tp4-ep4" in t and "no_regression" not in t} == {
        "ERROR"
    }
    text = result.stdout.str()
    assert "pp8-tp4-ep4: boot failed" in text
    assert "CUDA out of memory" in text
    # The header and the final line agree on what was collected, deselected and run.
    collected, deselected, selected, ran = counts(text)
    assert selected == ran == len(seen) and collected == selected + deselected, text[-1500:]
    assert f"{deselected} deselected" in text.strip().splitlines()[-1]
    # The log tail is shown once, with the layout's first test; the others name that test.
    failed = [t for t, o in seen.items() if "pp8-tp4-ep4" in t and o == "ERROR"]
    assert text.count(".log (last ") == 1, text
    assert text.count("log tail are shown with ") == len(failed) - 1 > 0, text
    assert re.search(r"ERROR at setup of test_topology\[pp8-tp4-ep4\] _+\npp8-tp4-ep4: boot fail",
                     text), text
    # Every node's tail and every fatal line stay in the run folder.
    kept = next(run_dir(reports).rglob("boot-failure.txt")).read_text()
    assert kept.count(".log (last 25 lines) ---") == 4, kept
    # The failing layout was booted once, not once per test.
    log = (run_dir(reports) / "progress.log").read_text()
    # The live status says where the sweep stands, and when it ends once a boot and a round
    # were measured: pp4 first (no ETA yet while it boots), then pp8.
    assert re.search(r"pp4-tp8-ep4 booting .* \| layout 1/2$", log, re.M), log
    assert re.search(r"pp8-tp4-ep4 booting .* \| layout 2/2, ETA \d+ (s|min)$", log, re.M), log
    assert log.count("pp8-tp4-ep4: booting on") == 1
    configs = {r["config_id"]: r for r in rows(run_dir(reports) / "configs.csv")}
    assert configs["pp8-tp4-ep4"]["boot_ok"] == "False"
    assert "CUDA out of memory" in configs["pp8-tp4-ep4"]["boot_error"]
    # A failed boot's time is emulated too (the scale its ranks were started with); held_s real.
    assert float(configs["pp8-tp4-ep4"]["boot_s"]) > float(configs["pp8-tp4-ep4"]["held_s"])


# A "server" that is healthy but whose /server_info is an HTML page (a proxy, another server).
HTML_RANK = """
import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok" if self.path == "/health" else b"<html><body>maintenance</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain" if self.path == "/health" else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

parser = argparse.ArgumentParser()
parser.add_argument("--host")
parser.add_argument("--port", type=int)
args, _ = parser.parse_known_args()
print("serving", flush=True)
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
"""



def test_server_info_that_is_not_json_is_a_clean_boot_failure(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "html_rank.py").write_text(HTML_RANK)
    port = 39000 + os.getpid() % 400
    folder = pytester.path / "html"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(
        one_node_matrix("html", "html_rank", port, port + 400, site)
    )
    (folder / "test_sweep.py").write_text((REPO / "test_matrix" / "test_sweep.py").read_text())
    reports = tmp_path / "reports"
    result = run(pytester, folder, "-v", "--ppsweep-reports", reports)
    text = result.stdout.str()
    seen = outcomes(text)
    assert set(seen.values()) == {"ERROR"} and len(seen) == 6, text[-3000:]  # + valid, outputs
    where = f"rank 0 (node0 127.0.0.1) server info: GET http://127.0.0.1:{port}/server_info"
    assert f"{where} answered 200 (content type text/html) with no JSON object; body starts " \
        "'<html><body>maintenance</body></html>'" in text
    assert "JSONDecodeError" not in text and "Traceback" not in text
    assert "During handling of the above exception" not in text  # the reason once per test
    configs = {r["config_id"]: r for r in rows(run_dir(reports) / "configs.csv")}
    assert configs["pp1-tp1-ep1"]["boot_ok"] == "False"
    assert configs["pp1-tp1-ep1"]["boot_error"].startswith(f"{where} answered 200")
    # Told as every boot failure (service.readiness.boot_failure): node0 named, the summary
    # short, the tail once with the first test, the others naming it, everything kept.
    first = re.search(r"_ ERROR at setup of test_topology\[pp1-tp1-ep1\] _+\n(.*?)\n_", text,
                      re.S)
    assert first and len(first[1].splitlines()) <= SUMMARY_LINES, text
    assert "--- node0.log (last " in first[1] and text.count(".log (last ") == 1, text
    assert text.count("log tail are shown with ") == len(seen) - 1, text
    kept = next(run_dir(reports).rglob("boot-failure.txt")).read_text()
    assert where in kept and "--- node0.log (last 25 lines) ---" in kept, kept
    assert not [e for e in proc_entries_of(str(site))], "the stub rank was left running"


def proc_entries_of(marker: str) -> list[int]:
    """PIDs whose environment or command line holds ``marker``."""
    pids = []
    for entry in proc_entries():
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_invalid_matrix_launches_nothing(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder = sweep_dir()
    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text().replace("pp = 8\ntp = 4", "pp = 8\ntp = 2"))
    reports = tmp_path / "reports"
    result = run(pytester, folder, "--ppsweep-reports", reports)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{toml}*expected PP × TP = 32*found 8 × 2 = 16*"])
    assert not reports.exists() or not any(reports.iterdir())


def test_xdist_workers_on_one_cluster_are_refused(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    result = run(pytester, sweep_dir(), "-n", "2", "--ppsweep-reports", tmp_path / "r")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*-n 2: the cluster pool has 1 cluster(s) (local)*"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_mid_sweep_keeps_rows_and_leaves_no_process(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path, sig: int
) -> None:
    folder = sweep_dir(scale=200)
    reports = tmp_path / "reports"
    port = next(
        line
        for line in (folder / "ppsweep.toml").read_text().splitlines()
        if line.startswith("port =")
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(folder), "--ppsweep-reports", str(reports), "-q"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if reports.exists() and any(rows(p / "results.csv") for p in reports.iterdir()):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        before = rows(run_dir(reports) / "results.csv")
        assert before, "no round finished within 120 s"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert not sim_processes(f"--{port.replace(' = ', ' ')}"), "ranks left after the interrupt"
    after = rows(run_dir(reports) / "results.csv")
    assert after[: len(before)] == before  # every finished round kept, untouched
    with (run_dir(reports) / "results.csv").open(newline="") as fh:
        assert all(len(r) == len(after[0]) for r in csv.reader(fh))  # no torn row
    assert b"KeyboardInterrupt" in out or b"Interrupted" in out


@pytest.mark.slow
def test_whole_seed_sweep_on_the_emulator(pytester: pytest.Pytester, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    result = run(
        pytester, REPO / "test_matrix", "--ppsweep-reports", reports,
        "--ppsweep-time-scale", "1000",
        # at 1000x a round lasts a fraction of a real second: its spread is the machine's noise
        "--ppsweep-spread-rule", "warn",
    )
    result.assert_outcomes(passed=5 * (1 + 2 + 2 + 1 + 1 + 1), deselected=5 * 2)
    results = rows(run_dir(reports) / "results.csv")
    assert len(results) == 5 * 2 * 3
    assert all(r["completed"] == "40" and r["failed"] == "0" for r in results)
    assert all(r["input_tokens"] == str(40 * 16384) for r in results)
    # The KV capacity each layout's engine reports, and the requests of 16,384 + 1 tokens it
    # holds at once: recorded per layout and shown beside the headroom.
    configs = rows(run_dir(reports) / "configs.csv")
    kv = {c["config_id"]: (int(c["kv_tokens"]), int(c["kv_requests"])) for c in configs}
    assert len(kv) == 5 and all(t > 0 and n == t // 16385 for t, n in kv.values()), kv
    assert len({t for t, _ in kv.values()}) > 1  # it belongs to the layout, not the model
    result.stdout.fnmatch_lines(["KV cache capacity the engine reports*"])
