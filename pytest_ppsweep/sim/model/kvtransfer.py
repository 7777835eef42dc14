"""The KV hand-off of prefill/decode (P/D) disaggregation: what a request's KV weighs and how long
its transfer from the prefill server to the decode server takes.

SGLang moves a finished prefill's KV to the decode server over the transfer backend (mooncake,
nixl, ... over RDMA; 0.5.23 sglang/srt/disaggregation/). The emulator charges that move as

    transfer_s = p2p_latency_us + prompt_tokens x kv_bytes_per_token / busbw_multinode_gbs

with the profile's own values, none added for P/D:

* ``kv_bytes_per_token`` = ``[model] kv_bytes_per_token_per_layer`` x ``num_layers``: the KV one
  token holds in the whole stack, sent once (an MLA latent is replicated on every TP rank, so
  one copy is what a decode rank needs; a sharded KV's shards travel in parallel, one per rank
  pair, which takes the same time as one copy over one link at that link's bandwidth).
* the bandwidth is the inter-node bandwidth the seeds measured (seeds §9.2: NCCL
  ``all_reduce_perf`` across nodes, 128/256 MiB, busbw 39-41 GB/s over 400G RoCE), which the
  profile carries as ``[network] busbw_multinode_gbs``; ``p2p_latency_us`` is the profile's
  point-to-point latency (an assumption there, see the profile).
* one prefill server's transfers share its link: they go one after another, first come first
  served (:class:`TransferLink`), so concurrent requests queue for the NIC as they would share it.

The ``fake`` backend moves nothing: SGLang's ``FakeKVSender.poll()`` reports success as soon as
``send()`` is called (0.5.23 disaggregation/fake/conn.py), so decode runs over uncomputed KV and
its outputs are meaningless; :func:`transfer_s` is 0 for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .profile import Profile

FAKE_BACKEND = "fake"


def kv_bytes_per_token(profile: Profile) -> int:
    """Bytes of KV one token holds across every layer of the emulated model."""
    return profile.model.kv_bytes_per_token_per_layer * profile.model.num_layers


def transfer_s(profile: Profile, tokens: int, backend: str) -> float:
    """Emulated seconds to move ``tokens`` tokens' KV from a prefill to a decode server."""
    if backend == FAKE_BACKEND or tokens <= 0:
        return 0.0
    net = profile.network
    return net.p2p_latency_us * 1e-6 + tokens * kv_bytes_per_token(profile) / (
        net.busbw_multinode_gbs * 1e9
    )


@dataclass
class TransferLink:
    """One prefill server's link to the decode servers: transfers in arrival order, each
    starting when the previous one is done (emulated seconds)."""

    free_at: float = 0.0

    def book(self, now: float, duration_s: float) -> float:
        """Reserve the link for a transfer ready to start at ``now``; returns when it ends."""
        start = max(now, self.free_at)
        self.free_at = start + duration_s
        return self.free_at
