"""Resolve launch arguments like SGLang's ``ServerArgs.__post_init__`` + ``check_server_args``.

Produces one frozen :class:`SimConfig` per rank: resolved defaults (chunk size, memory
fraction, backends), the layout, the memory and boot plans. Violations of SGLang's own checks
raise :class:`LaunchError` carrying the traceback text SGLang would print.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.bootplan import BootPlan, plan_boot
from ..model.gpumem import MemoryPlan, plan_memory
from ..model.placement import Layout
from ..model.profile import Profile
from .faultlog import traceback_lines
from .serverargs import EP_SPANNING_A2A, ServerArgs
from .settings import SimSettings

DEFAULT_DIST_TIMEOUT_S = 600.0  # emulated; PyTorch's default store timeout scale
# Without --dist-timeout the wait also lasts at least this many *real* seconds: process start-up
# is real time, and on a loaded machine 600 emulated s (0.3 s at 2000x) is shorter than that.
DEFAULT_DIST_TIMEOUT_REAL_FLOOR_S = 10.0
SITE_PY = "/usr/local/lib/python3.12/dist-packages"
SERVER_ARGS_PY = f"{SITE_PY}/sglang/srt/server_args.py"
VALIDATION_HOOK_PY = f"{SITE_PY}/sglang/srt/arg_groups/validation_hook.py"
PD_HOOK_PY = f"{SITE_PY}/sglang/srt/arg_groups/pd_disaggregation_hook.py"


class LaunchError(Exception):
    """SGLang refused the arguments; ``text`` is what it prints (a traceback)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _assert_fail(
    line: int, code: str, message: str, exc: str = "AssertionError"
) -> LaunchError:
    """An assertion of SGLang 0.5.23's ``check_server_args`` (validation_hook.py, ``line``),
    as launch_server prints it: the outer and inner frames of the real traceback (the middle
    ones left out), then ``exc: message``."""
    frames = [
        (
            "<frozen runpy>",
            198,
            "_run_module_as_main",
            "return _run_code(code, main_globals, None,",
        ),
        (f"{SITE_PY}/sglang/launch_server.py", 84, "<module>", "run_server(server_args)"),
        (
            f"{SITE_PY}/sglang/srt/entrypoints/engine.py",
            1165,
            "_launch_subprocesses",
            "server_args.check_server_args()",
        ),
        (SERVER_ARGS_PY, 511, "check_server_args", "check_server_args(self)"),
        (VALIDATION_HOOK_PY, line, "check_server_args", code),
    ]
    return LaunchError("\n".join(traceback_lines(frames, f"{exc}: {message}")))


@dataclass(frozen=True)
class SimConfig:
    """Everything a rank needs, resolved."""

    args: ServerArgs
    argv: tuple[str, ...]
    settings: SimSettings
    profile: Profile
    layout: Layout
    mem: MemoryPlan
    boot: BootPlan
    chunked_prefill_size: int
    ep_size: int
    served_model_name: str
    dist_timeout_s: float
    notes: tuple[str, ...]

    @property
    def pp_max_micro_batch_size(self) -> int:
        """Effective value: the flag, else ``max(max_running_requests // pp, 1)``."""
        if self.args.pp_max_micro_batch_size is not None:
            return self.args.pp_max_micro_batch_size
        return max(self.mem.max_running_requests // self.layout.pp, 1)

    @property
    def transfer_backend(self) -> str:
        """The resolved KV transfer backend: ``mooncake_tcp`` is mooncake over TCP (0.5.23
        pd_disaggregation_hook.py rewrites it), every other name stays."""
        backend = self.args.disaggregation_transfer_backend
        return "mooncake" if backend == "mooncake_tcp" else backend

    def dist_timeout_real_s(self) -> float:
        """Real seconds to wait for the other ranks (see DEFAULT_DIST_TIMEOUT_REAL_FLOOR_S)."""
        scaled = self.dist_timeout_s / self.settings.time_scale
        if self.args.dist_timeout is not None:
            return scaled
        return max(scaled, DEFAULT_DIST_TIMEOUT_REAL_FLOOR_S)


def check_args(args: ServerArgs) -> None:
    """SGLang's argument checks that fail before anything starts."""
    if (args.tp_size * args.pp_size) % args.nnodes != 0:
        raise _assert_fail(
            179,
            "assert (cfg.tp_size * cfg.pp_size) % cfg.nnodes == 0, (",
            "tp_size must be divisible by number of nodes",
        )
    if args.node_rank >= args.nnodes or args.node_rank < 0:
        # the emulator's own refusal: SGLang 0.5.23's check_server_args lets it pass (it fails
        # later, not modelled); tests/sim/launch/test_refusals.py lists which refusals are real
        raise _assert_fail(
            179,
            "assert self.node_rank < self.nnodes",
            f"node_rank ({args.node_rank}) must be in [0, nnodes={args.nnodes})",
        )
    if args.nnodes > 1 and not args.dist_init_addr:
        # the emulator's own refusal: SGLang 0.5.23's check_server_args lets it pass (it fails
        # later, not modelled); tests/sim/launch/test_refusals.py lists which refusals are real
        raise _assert_fail(
            179,
            "assert self.dist_init_addr is not None",
            "--dist-init-addr is required when --nnodes > 1",
        )
    if args.dp_size > 1 and args.nnodes != 1:
        raise _assert_fail(
            199,
            "assert not (cfg.dp_size > 1 and cfg.nnodes != 1), (",
            "multi-node data-parallel replicas are not supported; use attention DP "
            "(--attn-dp-size) across nodes",
        )
    if args.pp_max_micro_batch_size is not None and args.pp_max_micro_batch_size < 1:
        raise _assert_fail(
            183,
            "assert cfg.pp_max_micro_batch_size is None or cfg.pp_max_micro_batch_size >= 1, (",
            "pp_max_micro_batch_size must be a positive integer or None (for auto-compute). "
            f"Got: {args.pp_max_micro_batch_size}",
        )
    if (
        args.chunked_prefill_size is not None
        and args.chunked_prefill_size > 0
        and args.chunked_prefill_size % args.page_size != 0
    ):
        raise _assert_fail(
            244,
            "assert cfg.chunked_prefill_size % cfg.page_size == 0, (",
            "chunked_prefill_size must be divisible by page_size",
        )
    ep = args.tp_size if args.moe_a2a_backend in EP_SPANNING_A2A else args.ep_size
    if ep > args.tp_size or ep < 1:  # an older SGLang's failure: 0.5.23 passes the check
        raise LaunchError(
            "\n".join(
                traceback_lines(
                    [
                        (
                            SERVER_ARGS_PY,
                            2388,
                            "_handle_moe_kernel_config",
                            "self.moe_tp_size = self.tp_size // self.ep_size",
                        ),
                        (
                            "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/moe/utils.py",
                            112,
                            "get_moe_ep_rank",
                            "return tp_rank // (tp_size // ep_size)",
                        ),
                    ],
                    f"ZeroDivisionError: integer division or modulo by zero (tp_size={args.tp_size}, "  # noqa: E501
                    f"ep_size={ep}: ep_size must divide tp_size)",
                )
            )
        )
    if args.disaggregation_mode == "prefill" and args.disaggregation_transfer_backend == "fake":
        # 0.5.23 sglang/srt/arg_groups/pd_disaggregation_hook.py, handle_pd_disaggregation
        raise LaunchError(
            "\n".join(
                traceback_lines(
                    [(PD_HOOK_PY, 146, "handle_pd_disaggregation",
                      'assert cfg.disaggregation_transfer_backend != "fake", (')],
                    "AssertionError: Prefill server does not support 'fake' as the transfer "
                    "backend",
                )
            )
        )
    if args.tp_size % ep != 0:
        # the emulator's own refusal (see node_rank above)
        raise _assert_fail(
            179,
            "assert self.tp_size % self.ep_size == 0",
            f"tp_size ({args.tp_size}) must be divisible by ep_size ({ep})",
        )


def resolve(
    args: ServerArgs, argv: tuple[str, ...], settings: SimSettings, profile: Profile
) -> SimConfig:
    """Resolve defaults; raises LaunchError for invalid arguments."""
    check_args(args)
    notes: list[str] = []
    ep = args.ep_size
    if args.moe_a2a_backend in EP_SPANNING_A2A and ep != args.tp_size:
        # SGLang 0.5.23's wording (sglang/srt/arg_groups/overrides.py, _a2a_ep_size)
        notes.append(
            f"{args.moe_a2a_backend} MoE is enabled. The expert parallel size is adjusted "
            f"from {ep} to the tensor parallel size [{args.tp_size}]."
        )
        ep = args.tp_size
    if args.pp_size > 1:
        notes.append("Pipeline parallelism is incompatible with overlap schedule.")
    if args.disable_cuda_graph:
        notes.append(
            "--disable-cuda-graph is deprecated; use --cuda-graph-backend-decode=disabled "
            "--cuda-graph-backend-prefill=disabled instead."
        )
    chunk = args.chunked_prefill_size or profile.memory.chunked_prefill_size_default
    layout = Layout(tp=args.tp_size, pp=args.pp_size, ep=ep, nnodes=args.nnodes)
    mem = plan_memory(
        profile,
        layout,
        mem_fraction_static=args.mem_fraction_static,
        chunked_prefill_size=chunk,
        max_total_tokens=args.max_total_tokens,
        max_running_requests=args.max_running_requests,
        context_length=args.context_length,
        decode_graph=args.decode_graph,
        moe_a2a_backend=args.moe_a2a_backend,
    )
    timeout = float(args.dist_timeout) if args.dist_timeout is not None else DEFAULT_DIST_TIMEOUT_S
    return SimConfig(
        args=args,
        argv=argv,
        settings=settings,
        profile=profile,
        layout=layout,
        mem=mem,
        boot=plan_boot(mem),
        chunked_prefill_size=chunk,
        ep_size=ep,
        served_model_name=args.served_model_name or args.model_path,
        dist_timeout_s=timeout,
        notes=tuple(notes),
    )
