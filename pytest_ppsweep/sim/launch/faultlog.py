"""Texts of SGLang / PyTorch / NCCL failures, as they appear in real logs (contract §3.2, §3.6)."""

from __future__ import annotations

SITE = "/usr/local/lib/python3.12/dist-packages"
SCHED_FRAMES = [
    (
        f"{SITE}/sglang/srt/managers/scheduler.py",
        6368,
        "run_scheduler_process",
        "scheduler = Scheduler(",
    ),
    (f"{SITE}/sglang/srt/managers/scheduler.py", 612, "__init__", "self.init_model_worker()"),
    (
        f"{SITE}/sglang/srt/managers/tp_worker.py",
        241,
        "__init__",
        "self.model_runner = ModelRunner(",
    ),
]


def traceback_lines(frames: list[tuple[str, int, str, str]], exc: str) -> list[str]:
    """A Python traceback: header, ``File`` / code lines, exception line."""
    out = ["Traceback (most recent call last):"]
    for path, lineno, func, code in frames:
        out.append(f'  File "{path}", line {lineno}, in {func}')
        out.append(f"    {code}")
    out.extend(exc.splitlines())
    return out


def scheduler_exception(extra: list[tuple[str, int, str, str]], exc: str) -> str:
    """``Scheduler hit an exception: Traceback ...`` as one multi-line record."""
    lines = traceback_lines(SCHED_FRAMES + extra, exc)
    return "Scheduler hit an exception: " + "\n".join(lines)


def nccl_init_error(rank: int) -> str:
    """NCCL communicator init failure surfaced by torch.distributed."""
    return scheduler_exception(
        [
            (
                f"{SITE}/sglang/srt/distributed/parallel_state.py",
                1512,
                "init_distributed_environment",
                "torch.distributed.barrier(group=_WORLD.cpu_group)",
            )
        ],
        "torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, internal error - please report "
        "this issue to the NCCL developers, NCCL version 2.28.9\n"
        f"ncclInternalError: Internal check failed.\nLast error:\nNET/IB : rank {rank} "
        "ibv_modify_qp failed with 110 Connection timed out",
    )


def invalid_device_context(gpu_id: int, tp_rank: int, tp_size: int) -> str:
    """The warning ModelRunner logs when ``set_device`` fails (sglang/srt/model_executor/
    model_runner.py, 0.5.23), before the exception."""
    return (
        f"Context: self.device='cuda' get_device().gpu_id={gpu_id} "
        f"os.environ.get('CUDA_VISIBLE_DEVICES')=None get_parallel().tp_rank={tp_rank} "
        f"get_parallel().tp_size={tp_size}"
    )


def invalid_device_error() -> str:
    """A scheduler whose GPU index is past the node's GPUs: ``torch.cuda.set_device`` fails."""
    return scheduler_exception(
        [
            (
                f"{SITE}/sglang/srt/model_executor/model_runner.py",
                455,
                "__init__",
                "torch.get_device_module(self.device).set_device(get_device().gpu_id)",
            ),
            (
                f"{SITE}/torch/cuda/__init__.py",
                689,
                "set_device",
                "torch._C._cuda_setDevice(device)",
            ),
        ],
        "torch.AcceleratorError: CUDA error: invalid device ordinal\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    )


def oom_error(gpu: int, total_gib: float, free_gib: float) -> str:
    """CUDA OOM while loading weights."""
    return scheduler_exception(
        [
            (
                f"{SITE}/sglang/srt/model_loader/loader.py",
                655,
                "load_model",
                "model = _initialize_model(model_config, self.load_config)",
            )
        ],
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {gpu} has a "
        f"total capacity of {total_gib:.2f} GiB of which {free_gib:.2f} GiB is free. Process has "
        f"{total_gib - free_gib:.2f} GiB memory in use.",
    )


def a2a_oom_error(gpu: int, backend: str, alloc_gib: float, total_gib: float,
                  free_gib: float) -> str:
    """CUDA OOM when an MoE all-to-all backend allocates its dispatch/combine buffers."""
    where = {
        "flashinfer": (f"{SITE}/sglang/srt/layers/moe/token_dispatcher/flashinfer.py", 276,
                       "__init__", "self.moe_a2a = MoeAlltoAll("),
    }.get(backend, (f"{SITE}/sglang/srt/layers/moe/token_dispatcher/deepep.py", 304,
                    "get_deepep_buffer",
                    "state.buffer = Buffer(group, num_nvl_bytes, num_rdma_bytes, **buffer_kwargs)"))
    return scheduler_exception(
        [where],
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc_gib:.2f} GiB. "
        f"GPU {gpu} has a total capacity of {total_gib:.2f} GiB of which {free_gib:.2f} GiB is "
        f"free. Process has {total_gib - free_gib:.2f} GiB memory in use.",
    )  # fmt: skip


def forward_oom_error(gpu: int, alloc_gib: float, total_gib: float, free_gib: float) -> str:
    """CUDA OOM in the forward of a prefill chunk whose workspace does not fit."""
    return scheduler_exception(
        [(f"{SITE}/sglang/srt/model_executor/model_runner.py", 2290, "forward_extend",
          "return self.model.forward(")],
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc_gib:.2f} GiB. "
        f"GPU {gpu} has a total capacity of {total_gib:.2f} GiB of which {free_gib:.2f} GiB is "
        f"free. Process has {total_gib - free_gib:.2f} GiB memory in use.",
    )  # fmt: skip


def custom_ar_capture_error() -> str:
    """Custom all-reduce IPC registration failure during decode CUDA-graph capture."""
    return scheduler_exception(
        [
            (
                f"{SITE}/sglang/srt/model_executor/cuda_graph_runner.py",
                412,
                "__init__",
                "self.capture()",
            )
        ],
        "Exception: Capture cuda graph failed: invalid argument\n"
        f"{SITE}/sgl_kernel/csrc/allreduce/custom_all_reduce.cuh:350 in get_graph_buffer_ipc_meta\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
        "3. disable torch compile by not using --enable-torch-compile\n"
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose",
    )


def not_enough_memory_error() -> str:
    """KV pool came out empty."""
    return scheduler_exception(
        [
            (
                f"{SITE}/sglang/srt/model_executor/pool_configurator.py",
                96,
                "configure",
                'raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")',  # noqa: E501
            )
        ],
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    )


def store_timeout_error(timeout_s: float, joined: int, world: int) -> str:
    """Rank 0's TCPStore gave up waiting for the other ranks."""
    return scheduler_exception(
        [
            (
                f"{SITE}/torch/distributed/rendezvous.py",
                189,
                "_create_c10d_store",
                "return TCPStore(",
            )
        ],
        f"torch.distributed.DistStoreError: Timed out after {int(timeout_s) + 1} seconds waiting for "  # noqa: E501
        f"clients. {joined}/{world} clients joined.",
    )


def client_timeout_error(timeout_s: float, addr: str) -> str:
    """A rank >= 1 could not reach the rendezvous."""
    host, _, port = addr.rpartition(":")
    return scheduler_exception(
        [
            (
                f"{SITE}/torch/distributed/rendezvous.py",
                189,
                "_create_c10d_store",
                "return TCPStore(",
            )
        ],
        "torch.distributed.DistNetworkError: The client socket has timed out after "
        f"{int(timeout_s)}s while trying to connect to ({host}, {port}).",
    )


def peer_lost_error(detail: str) -> str:
    """A collective failed because a peer process went away (Gloo)."""
    return scheduler_exception(
        [
            (
                f"{SITE}/sglang/srt/managers/scheduler.py",
                2010,
                "run_event_loop",
                "dispatch_event_loop(self)",
            ),
            (
                f"{SITE}/torch/distributed/distributed_c10d.py",
                3153,
                "recv_object_list",
                "recv(object_sizes_tensor, src=src, group=group)",
            ),
        ],
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by "
        f"peer [{detail}]",
    )


def watchdog_lines(timeout_s: float) -> list[str]:
    """The NEW scheduler watchdog record."""
    shown = int(timeout_s) if float(timeout_s).is_integer() else timeout_s
    return [
        "Scheduler debug info:\nbatch=ScheduleBatch(forward_mode=EXTEND, #req=1), forward_ct=1",
        f"Scheduler watchdog timeout (self.watchdog_timeout={shown}, self.soft=False)",
    ]


SIGQUIT_LINE = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
