"""SGLang's bench_serving, run through bench_serving_launcher.py in the SGLang venv (parent side):
its command line for the seed workload, one run, or a series of runs in one process."""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .processes import stop_process
from .stats import cpu_seconds

LAUNCHER = Path(__file__).resolve().with_name("bench_serving_launcher.py")


@dataclass
class BenchServingRun:
    """One bench_serving run: its JSONL result, per-request facts and CPU figures."""

    result: dict[str, Any]
    requests: list[dict[str, Any]]
    warmup: list[dict[str, Any]]
    bench_cpu_s: float  # rusage of the launcher around benchmark()
    bench_wall_s: float
    child_cpu_s: float  # the whole child process (start-up, imports, tokenizer, dataset)
    child_wall_s: float
    stdout: str = field(repr=False, default="")


def bench_serving_args(
    base_url: str,
    *,
    tokenizer: str,
    num_prompts: int,
    concurrency: int,
    input_len: int,
    output_len: int = 1,
    output_file: Path,
    seed: int = 1,
    flush_cache: bool = True,
    request_rate: float = float("inf"),
) -> list[str]:
    """The bench_serving command line of the seed workload (random-ids, --tokenize-prompt)."""
    args = [
        "--backend",
        "sglang",
        "--base-url",
        base_url,
        "--dataset-name",
        "random-ids",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf" if request_rate == float("inf") else f"{request_rate:g}",
        "--tokenize-prompt",
        "--output-details",
        "--output-file",
        str(output_file),
        "--tokenizer",
        tokenizer,
        "--model",
        tokenizer,
        "--warmup-requests",
        "1",
        "--seed",
        str(seed),
        "--disable-tqdm",
    ]
    if flush_cache:
        args.append("--flush-cache")
    return args


def child_env() -> dict[str, str]:
    """Environment of a bench_serving child: offline, quiet about its deprecated module path."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONWARNINGS": "ignore::FutureWarning",
    }


def run_bench_serving(
    python: str, args: Sequence[str], workdir: Path, *, tap: bool, timeout_s: float = 900.0
) -> BenchServingRun:
    """Run bench_serving with ``args`` through the launcher; parse what it wrote."""
    out_file = Path(args[list(args).index("--output-file") + 1])
    out_file.unlink(missing_ok=True)  # bench_serving appends
    facts = workdir / f"facts-{time.monotonic_ns()}.json"
    cmd = [python, str(LAUNCHER), str(facts), *(["--tap"] if tap else []), "--", *args]
    env = child_env()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout_s, check=False, cwd=workdir
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or not facts.exists() or not out_file.exists():
        raise RuntimeError(
            f"bench_serving failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-6000:]}"
        )
    lines = out_file.read_text().strip().splitlines()
    data = json.loads(facts.read_text())["runs"][-1]
    return BenchServingRun(
        result=json.loads(lines[-1]),
        requests=data["requests"],
        warmup=data["warmup"],
        bench_cpu_s=data["bench_cpu_s"],
        bench_wall_s=data["bench_wall_s"],
        child_cpu_s=cpu_seconds(after) - cpu_seconds(before),
        child_wall_s=wall,
        stdout=proc.stdout,
    )


class BenchServingSeries:
    """One bench_serving process for ``repeat`` runs, each started when :meth:`run` is called.

    The launcher runs ``cli_main()`` once, then waits for ``<facts>.go.<i>`` before run ``i``;
    so other work (our client) can run between bench_serving's runs without paying its start-up
    (imports, tokenizer) every time. Each run is a full ``cli_main()``: dataset, warmup, flush,
    measured requests, JSONL line.
    """

    def __init__(
        self,
        python: str,
        args: Sequence[str],
        workdir: Path,
        repeat: int,
        *,
        tap: bool = False,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.out_file = Path(args[list(args).index("--output-file") + 1])
        self.out_file.unlink(missing_ok=True)
        self.facts = workdir / f"facts-{time.monotonic_ns()}.json"
        self.log = workdir / f"bench_serving-{time.monotonic_ns()}.log"
        self.repeat, self.done = repeat, 0
        cmd = [
            python,
            str(LAUNCHER),
            str(self.facts),
            "--repeat",
            str(repeat),
            "--gate",
            *(["--tap"] if tap else []),
            "--",
            *args,
        ]
        env = {**child_env(), **(extra_env or {})}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir
            )

    def run(self, timeout_s: float = 600.0) -> BenchServingRun:
        """Start the next run (the first starts by itself) and wait for its results."""
        i = self.done
        if i >= self.repeat:
            raise RuntimeError(f"all {self.repeat} runs are done")
        if i > 0:
            Path(f"{self.facts}.go.{i}").touch()
        marker, deadline = Path(f"{self.facts}.done.{i}"), time.monotonic() + timeout_s
        while not marker.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(
                    f"bench_serving run {i} did not finish (exit "
                    f"{self.proc.returncode}):\n"
                    f"{self.log.read_text(errors='replace')[-6000:]}"
                )
            time.sleep(0.02)
        self.done += 1
        data = json.loads(self.facts.read_text())["runs"][i]
        lines = self.out_file.read_text().strip().splitlines()
        return BenchServingRun(
            result=json.loads(lines[i]),
            requests=data["requests"],
            warmup=data["warmup"],
            bench_cpu_s=data["bench_cpu_s"],
            bench_wall_s=data["bench_wall_s"],
            child_cpu_s=math.nan,
            child_wall_s=math.nan,
        )

    def close(self) -> None:
        """Let the process end after its last run, or stop it."""
        if self.done >= self.repeat:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        stop_process(self.proc)

    def __enter__(self) -> BenchServingSeries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
