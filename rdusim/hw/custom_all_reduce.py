"""vLLM's custom all-reduce: the kernel vLLM's tensor parallelism runs instead of NCCL for a small
all-reduce inside one NVLink node, and when it runs it.

Owns: ``CustomArLink``, ``CustomArPlan``, ``custom_ar_applies``, ``custom_ar_stages``,
``custom_ar_blocks``, ``custom_ar_plan``, ``custom_ar_wire_bytes`` and vLLM's constants.
Imports: hw.closed_network. Never simulates: ``rdusim.sim.custom_ar`` runs a plan.

The facts are vLLM's source (``csrc/custom_all_reduce.cuh`` and
``vllm/distributed/device_communicators/custom_all_reduce.py``; the code here is ours):

- **When.** A tensor-parallel group of 2, 4, 6 or 8 GPUs of one node, fully NVLink-connected (on two
  GPUs any link), a buffer of a multiple of 16 bytes under ``max_size``: 8 MiB by default
  (``CustomAllreduce(max_size=8192 * 1024)``). Above it vLLM falls back (torch's symmetric-memory
  all-reduce where the node has NVLink multicast, else NCCL).
- **The kernel.** One launch, ``min(36, ceil(S / 16 / 512))`` blocks of 512 threads (``allreduce``:
  ``block_limit`` 36, ``threads`` 512), each thread working on 16-byte packs.
- **One stage** (``cross_device_reduce_1stage``; two GPUs at every size, four under 512 KiB, six and
  eight under 256 KiB): each block meets the same block of every rank (``barrier_at_start``: a flag
  stored into each peer's signal, its own spun on until every peer's arrives), each thread sums its
  packs of every rank's buffer (n - 1 of them read from peers over NVLink) and stores the sum, and the
  blocks meet again (``barrier_at_end``).
- **Two stages** (``cross_device_reduce_2stage``, above those sizes on 4-8 GPUs): after the first
  barrier, the rank's part S / n summed from every rank into its own temporary buffer; a barrier
  (release / acquire); every rank's part read into the result. No barrier at the end.

**The model** (``rdusim.sim.custom_ar``): the kernel's own fixed time (``CustomArLink.kernel_s``),
then each block: a barrier is a flag's way to a peer (``flag_s``: every rank's same block stores and
spins at once); a reading phase is the block's passes over its packs, each pass every active
thread's loads of a pack from each peer (all in flight at once), the block's bytes in flight for one
pass, on the NVLink that all blocks' reads come in on (``read_bytes_per_s``, max-min fair).

**A pass** (``CustomArLink.pass_at``). A lone block's pass is ``load_s`` (a fixed part: a peer load's
round trip and the loop's own work) plus ``per_load_s`` for each 16-byte load a thread keeps in
flight, one a peer, whatever the threads active. With ``blocks`` blocks reading, each block alternates
its fixed part (the lone pass less its own bytes at the link) and its bytes on the reads' link, which
the blocks there share; the blocks drift apart (their barriers only meet their peers' same block), so
a pass is the cycle time of that closed queueing network, by mean value analysis
(``rdusim.hw.closed_network``). It is the lone pass at one block and the blocks' bytes at the link when
many blocks fill it, and lifts a pass in between.

Where it comes from (docs/gpu.md, "vLLM's custom all-reduce"): run cw measured the flag (a ping-pong:
0.69 us one way) and showed that a pass is not a bare load's round trip and that reads do not come in
at the ring's write rate; run cx calibrates a one-load pass, the reads' link and the kernel's fixed
time on three rows and predicts the rest; runs da and db timed an emulation of vLLM's loop that run dd
found slower than vLLM's kernel as vLLM compiles it; runs de, df and dh timed vLLM's compiled loop
(``pass_t``) by a thread's loads and the blocks, and run di froze this form on 35 configurations never
timed (3.1% / -13.9%; the engine's earlier form, the lone pass or the link's share, 3.2% / -22.3%) and
was adopted by its registered rule. ``per_load_s`` is the slope of the lone-block passes of runs de,
df and dh; ``load_s`` is run cx's one-load pass less it. ``queue=False`` keeps the earlier form (a
pass the lone pass whatever the blocks; runs cx-dh's frozen tables).

What is left out: the local loads and stores (HBM, in L2 at these sizes), the sharper knee of a pass
as the blocks' loads in flight begin to fill the link (run di: 12 blocks at 2-3 loads 11-14% over the
network's cycle), a partial pass's cheaper loads (run db: with 192 threads a load costs less), the
order of the blocks' start, and the two-stage kernel's remainder (``S`` not a multiple of n packs).
The reads' link is taken to be one rate whatever the peers the reads come from [A] (run cz: 294 GB/s
from three peers against 327 from one), and a pass with loads from n - 1 peers to cost what as many
loads from one peer do (run db: three loads from one peer 1.37 us, run cz's three peers 1.39, on the
emulation; run dg checks it on vLLM's compiled loop). The two-stage kernel's middle barrier is a
release store, a system fence first: the plan charges one (``fence_s`` and ``fence_per_block_s``, 0 by
default). Run cy found that fence the same at every block count, so the documents charge a flat one
(run dc's form, adopted by run de on vLLM's compiled kernel); the stores it waits for, which grow it on
long two-stage calls, are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rdusim.hw.closed_network import closed_network_cycle

#: vLLM ``allreduce``: threads a block
VLLM_THREADS = 512
#: vLLM ``allreduce``: ``block_limit``, the most blocks a launch
VLLM_BLOCK_LIMIT = 36
#: vLLM ``packed_t``: bytes a thread loads from each rank at once (16 / sizeof(T) elements)
VLLM_PACK_BYTES = 16
#: vLLM ``CustomAllreduce.__init__``: ``max_size=8192 * 1024``, the buffer it takes up to (exclusive)
VLLM_MAX_BYTES = 8192 * 1024
#: vLLM ``CustomAllreduce._SUPPORTED_WORLD_SIZES``
VLLM_RANKS = (2, 4, 6, 8)


@dataclass(frozen=True)
class CustomArLink:
    """What the kernel's time is made of on a GPU (the document's ``nvlink.custom_all_reduce``)."""

    load_s: float            # a pass's fixed part, its loads aside (calibrated: run cx's pass less per_load)
    per_load_s: float        # what each 16-byte load a thread keeps in flight adds to a lone block's pass (calibrated)
    flag_s: float            # a flag store's way to a peer (a ping-pong, half a round; measured)
    read_bytes_per_s: float  # the NVLink a GPU's reads from its peers come in on (calibrated)
    kernel_s: float          # the kernel's own fixed time, its barriers aside (calibrated)
    fence_s: float = 0.0     # a release barrier's system fence, one block fencing (two stages' middle barrier)
    fence_per_block_s: float = 0.0  # what each further block fencing at once adds to it
    queue: bool = True       # the blocks' passes queue at the reads' link (run di); False: runs cx-dh's model

    def alone_at(self, loads: int) -> float:
        """A lone block's pass with ``loads`` 16-byte loads a thread in flight (one from each peer):
        ``load_s`` plus ``per_load_s`` for each."""
        return self.load_s + loads * self.per_load_s

    def pass_at(self, loads: int, blocks: int = 1) -> float:
        """A block's pass while ``blocks`` blocks read at once, each thread with ``loads`` loads in flight: the
        blocks a closed network (module docstring), each a fixed part (its lone pass less its own bytes at the
        reads' link) and its bytes on that link, which the blocks there share. Without ``queue``, the lone
        pass whatever the blocks (the link's max-min share still bounds it in ``rdusim.sim.custom_ar``)."""
        alone = self.alone_at(loads)
        if not self.queue:
            return alone
        at_link = loads * VLLM_THREADS * VLLM_PACK_BYTES / self.read_bytes_per_s
        return closed_network_cycle(max(alone - at_link, 0.0), at_link, blocks)

    def fence_at(self, blocks: int) -> float:
        """The release barrier's fence with ``blocks`` blocks fencing at once: ``fence_s`` plus
        ``fence_per_block_s`` for each block beyond the first."""
        return self.fence_s + self.fence_per_block_s * (blocks - 1)


@dataclass(frozen=True)
class CustomArPlan:
    """One custom all-reduce (module docstring): ``blocks`` blocks on ``ranks`` GPUs, each reading
    phase's packs (``phases``) split over the blocks' threads, a barrier before every phase and, with
    one stage, one at the end."""

    link: CustomArLink
    ranks: int
    stages: int
    blocks: int
    phases: tuple[int, ...]  # packs of each reading phase (one stage: S / 16; two: a rank's part, twice)

    @property
    def barriers(self) -> int:
        """One before each phase, and one at the end of a one-stage kernel (``barrier_at_end``)."""
        return len(self.phases) + (1 if self.stages == 1 else 0)

    @property
    def pass_s(self) -> float:
        """A block's pass, all the plan's blocks reading: a thread loads a pack from each of the n - 1 other
        ranks."""
        return self.pass_with(self.blocks)

    def pass_with(self, reading: int) -> float:
        """A block's pass while ``reading`` blocks read at once (a phase's last passes have fewer)."""
        return self.link.pass_at(self.ranks - 1, reading)

    @property
    def remote_bytes_a_thread(self) -> int:
        """Bytes a thread reads from peers a pass: a pack from each of the n - 1 other ranks."""
        return VLLM_PACK_BYTES * (self.ranks - 1)


def custom_ar_applies(nbytes: float, ranks: int, max_bytes: int = VLLM_MAX_BYTES) -> bool:
    """Whether vLLM runs its own kernel for this all-reduce (``should_custom_ar``: a supported group,
    whole 16-byte packs, under ``max_size``; the group fully NVLink-connected, as a node's is)."""
    return ranks in VLLM_RANKS and nbytes > 0 and nbytes % VLLM_PACK_BYTES == 0 and nbytes < max_bytes


def custom_ar_stages(nbytes: float, ranks: int) -> int:
    """vLLM's choice (``allreduce``'s REDUCE_CASE, full NVLink): one stage on two GPUs, and on four
    under 512 KiB, on six or eight under 256 KiB; else two."""
    if ranks == 2 or (ranks <= 4 and nbytes < 512 * 1024) or (ranks <= 8 and nbytes < 256 * 1024):
        return 1
    return 2


def custom_ar_blocks(nbytes: float, limit: int = VLLM_BLOCK_LIMIT) -> int:
    """vLLM's grid: ``min(block_limit, ceil(packs / threads))``, at least one block."""
    return max(1, min(limit, math.ceil(nbytes / VLLM_PACK_BYTES / VLLM_THREADS)))


def custom_ar_plan(nbytes: float, ranks: int, link: CustomArLink, stages: int | None = None,
                   block_limit: int = VLLM_BLOCK_LIMIT) -> CustomArPlan:
    """The plan of one custom all-reduce of ``nbytes`` on ``ranks`` GPUs: vLLM's stages and grid
    (``stages`` and ``block_limit`` force others, as run cw's sweep does). Two stages read a rank's
    part twice: the slowest rank's (the last, which also takes the remainder) in the first phase."""
    packs = int(nbytes // VLLM_PACK_BYTES)
    stages = stages or custom_ar_stages(nbytes, ranks)
    if stages == 1:
        phases: tuple[int, ...] = (packs,)
    else:
        part = packs // ranks
        phases = (packs - (ranks - 1) * part, part)
    return CustomArPlan(link, ranks, stages, custom_ar_blocks(nbytes, block_limit), phases)


def custom_ar_wire_bytes(nbytes: float, ranks: int, stages: int) -> float:
    """Bytes a GPU reads from its peers over NVLink: (n - 1) S with one stage, 2 (n - 1) / n S with two."""
    return (ranks - 1) * nbytes if stages == 1 else 2 * (ranks - 1) / ranks * nbytes
