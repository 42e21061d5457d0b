"""Collectives as NCCL runs them inside one NVLink/NVSwitch node, and the algorithm NCCL picks.

Owns: ``Fabric``, ``CollectiveCost``, ``collective_cost``, ``custom_ar_cost``, ``candidates``, ``wire_bytes``,
``memory_ops_per_wire_byte``, ``ring_plan``, ``p2p_plan``, ``p2p_channels_a_peer``, ``p2p_ll_channels``,
``p2p_ll_limit``
and NCCL's tuning tables. Imports: hw.closed_network, hw.custom_all_reduce. Never simulates: ``rdusim.sim.gpu`` charges
a collective kernel the ``time_s`` computed here.

The facts follow NCCL's own cost model, ``src/graph/tuning.cc`` of NVIDIA/nccl (v2.19-2.20,
commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2; cited below as *tuning.cc*), and the
bus-bandwidth definitions of NVIDIA/nccl-tests ``doc/PERFORMANCE.md``. The code is ours.

For every (algorithm, protocol) NCCL enables for a collective, its tuner predicts

    time = latency + bytes / algorithm bandwidth          (tuning.cc, ncclTopoGetAlgoTime)

and runs the fastest. Here:

- **latency** = base latency of the (algorithm, protocol) + steps x per-hop latency on NVLink:
  a ring all-reduce takes 2(n-1) steps, all-gather and reduce-scatter n-1; a single-node tree
  (a chain) 2(n-1) hops; NVLS (NVLink SHARP, the NVSwitch reduces) a fixed 23 us.
- **bandwidth** = the bytes each GPU puts on NVLink (``wire_bytes``) over the bus bandwidth
  NCCL achieves on the GPU's NVLinks (``Fabric.bus_bytes_per_s``), times the protocol's share:
  LL carries 4 data bytes in 8 and reaches 1/4 of it for an all-reduce (1/3 for all-gather and
  reduce-scatter), capped at 87.7 GB/s; LL128 0.92 (120 of 128 bytes); Simple all of it; the
  tree 0.92; NVLS 5/6 (tuning.cc's ratio for NVLS).

Wire bytes per GPU for ``S`` bytes (nccl-tests' busbw factors): ring all-reduce 2(n-1)/n S,
all-gather / reduce-scatter / all-to-all (n-1)/n S, chain tree all-reduce 2 S (every GPU
forwards the whole buffer up and down; tuning.cc's ratio 0.5). NVLS all-reduce (multimem
load-reduce of the GPU's slice from every GPU, then a multicast store of the result): each GPU
sends its whole buffer once to the switch and its reduced slice once, S (n+1)/n; NVLS
all-gather and reduce-scatter S. This n-dependence is ours (tuning.cc uses one ratio for all n);
with it the model gives an NVLS algorithm bandwidth of 258, 265, 270, 275 GB/s at 5-8 H100s
where NVIDIA/nccl issue #1455 reports 258, 265, 270, 273 (a check, nothing fitted to it).

**LL's rate by NCCL version**: v2.19-2.20 caps LL at ``llMaxBws`` 87.7 GB/s for Hopper (its
Hopper row copied Ampere's) after the shares above; later versions give Hopper its own row,
141.0 GB/s on one node (NVIDIA/nccl master ``src/graph/tuning.cc``, ncclTunerConstantsDefaults),
and NCCL 2.28.9 prints ring LL 141.0 GB/s for every collective on two H100s
(``benchmarks/gpu/h100x2-20261125t-nccl-tuning-table.txt``: all-reduce 141.0, all-gather and
reduce-scatter 282.0 algorithm bandwidth = 141.0 bus). A GPU document whose NCCL is that recent
gives it as ``nvlink.ll_bandwidth``; the ring's LL then runs at it or at half the bus, the
lower (NCCL's ``std::min(llMaxBw, busBw * .5)``; the half only binds on a fabric slower than
282 GB/s). The all-to-all's p2p LL, which NCCL does not tune, keeps the all-gather's share
under v2.19's cap, whatever ``ll_bandwidth`` says: a separate assumption [A]; where the document gives
``nvlink.p2p_ll_channel_bandwidth`` it moves at no more than its channels times that rate, NCCL's rule
giving a peer's LL part one channel each 8 KiB (``p2p_ll_channels``; runs dk and dl, docs/gpu.md).

**Memory operations per wire byte** (ring, Simple and LL128): a channel is one CTA that moves
every byte through its own loads and stores, and the ring steps of each collective make a
different number of them per byte it puts on NVLink (NVIDIA/nccl ``src/device/all_reduce.h``,
``all_gather.h``, ``reduce_scatter.h``, runRing; FIFO transport, no registered buffers):
all-reduce ``send`` (1 load, 1 store), n-2 ``recvReduceSend`` (2, 1), ``recvReduceCopySend``
(2, 2), n-2 ``recvCopySend`` (1, 2), ``recv`` (1, 1): 6n-4 operations over 2(n-1) wire chunks;
all-gather ``copySend`` (1, 2), n-2 ``recvCopySend`` (1, 2), ``recv`` (1, 1): 3n-1 over n-1;
reduce-scatter ``send`` (1, 1), n-2 ``recvReduceSend`` (2, 1), ``recvReduceCopy`` (2, 1):
3n-1 over n-1. ``Fabric.bus_bytes_per_s`` is fitted to the all-reduce, so all-gather and
reduce-scatter run at it times (all-reduce's operations per wire byte) / (theirs): 0.8 on two
GPUs, 0.96 on eight. Supported by measurement, not fitted to it: on two H100s, halving NCCL's
channels (NCCL_MAX_NCHANNELS=12) slows all three 1.3-1.5x at 256 MB (a pure link limit would
not move), and a 4x larger NCCL_BUFFSIZE changes nothing
(``benchmarks/gpu/h100x2-20261125m2-diag.log``); the 1 GB rows then stand at 1.24 (all-gather)
and 1.27 (reduce-scatter) times the all-reduce's time per wire byte, where 5/4 is this count's.

All-to-all is not a tuned collective in NCCL (nccl-tests' alltoall is grouped ncclSend /
ncclRecv to every peer): one direct NVSwitch hop per peer, all peers at once. Its protocol is
NCCL's p2p rule of the 2.28 line the measurements ran (2.28.9; NVIDIA/nccl ``src/enqueue.cc``
at commit 01e6dd915fdd2627a7205f5aa1c7f14d46990226, the closest stored version to the v2.28.9
tag, which we could not read itself):
addP2pToPlan takes LL when a peer's bytes are at most ``thresholdLL = nChannelsMax *
NCCL_P2P_LL_THRESHOLD``, nChannelsMax being ``p2pnChannelsPerPeer`` (32 on one NVLink node:
NCCL's INIT log), so 32 x 16 KB = 512 KB per peer whatever the ranks, else Simple.
The channel count scheduleP2pTasksToPlan starts a peer on (``nChannelsMin``: 32, halved while
that times the ranks exceeds the 32 p2p channels: 16 on 2 GPUs, 4 on 8) does not enter the
protocol (a later rewrite, ``src/enqueue/`` on master, compares the bytes with the
channels actually used instead; not the measured version). Its latency is
taken as one ring step of that protocol (LL: 6.6 + 0.6 us, Simple: 8.4 + 3.4 us) [A]: NCCL
has no p2p entry in its tuning model.

**A ring's Simple transfer, channel by channel** (where the GPU document gives ``nvlink.ring``;
``rdusim.sim.ring`` simulates it, the engine charges it): NCCL's tuner above chooses the algorithm
and protocol; what a ring Simple collective then takes is its channels' work. Each channel (one
CTA; ``nvlink.ring.channels`` of them) walks the buffer in loops (``ring_loop_chunks``: a loop is
channels x n x 2 MiB for the all-reduce, channels x 2 MiB of a rank's part for all-gather and
reduce-scatter, the last loop's chunk shrunk to what is left: ``src/device/all_reduce.h``,
``all_gather.h``, ``reduce_scatter.h`` runRing, the chunk NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 x
CHUNKSTEPS 4), and each loop is the primitive calls above in order (``ring_primitives``), each
moving one chunk through its loads and stores at the channel's rate (``nvlink.ring.channel_bandwidth``
over its operations a byte); every call but the last puts its chunk on NVLink, which the
channels on it share (``nvlink.ring.link_bandwidth``, max-min fair), the last (``recv``,
``recvReduceCopy``) is local. Channels start ``nvlink.ring.launch_skew`` apart across the
launch. NCCL launches them in clusters of 4 on sm90 (``src/enqueue.cc`` ncclLaunchKernel,
``src/init.cc``: ``cgaClusterSize`` 4), so they share the link evenly and start together: their
local calls coincide and the link idles until they drift apart, which the shared link itself
makes them do (a channel a little ahead gets more of the link while the others are local): the
mid-size Simple ramp (docs/gpu.md, "Runs cc and cd" and "A ring's channels in the engine").
Each call runs ``RING_SLICES`` slices, and a slice that puts bytes on NVLink ends with its post
(``nvlink.ring.post``: a system fence and a flag store to the peer, ``prims_simple.h`` genericOp),
during which its channel moves nothing; the local call's slices post a flag store only, 0.03 us,
left out (run ct). A post grows with the channels posting (``nvlink.ring.post_per_channel``;
``RingChannels.post_at``). The shipped documents leave both at 0: frozen on two GPUs the post takes
every group closer, but it over-charges rings of four ranks (runs cu and cv; docs/gpu.md, "Runs cs,
ct, cu and cv").

**An all-to-all's p2p Simple transfer, channel by channel** (where the GPU document gives
``nvlink.p2p``; ``rdusim.sim.p2p`` simulates it): each peer's part S / n goes on its channels
(``p2p_channels_a_peer``: NCCL's rule, 16 a peer on two GPUs up to 512 MiB, 8 on four, 4 on eight),
each channel's share in chunks of ``P2P_CHUNK_BYTES`` (``channel_chunks``), every peer at once. A
channel both sends and receives, at once on separate warps (NCCL 2.28 ``src/device/sendrecv.h``): its
send loop puts a chunk into the receiver's FIFO of ``P2P_FIFO_STEPS`` slots over NVLink (``nvlink.p2p
.send_bandwidth``, the GPU's channels sharing the ring's link) and posts it (``step``); its receive
loop copies a posted chunk out (``receive_bandwidth``) and frees the slot. The three constants are
fitted on one channel a peer (run cg); 1-8 channels a peer are predicted within 2-9% (runs ch, ci).
The channels sending share the link as a closed network (``P2pChannels.send_at``,
``rdusim.hw.closed_network``): with the link shared max-min NCCL's 16 a peer on two GPUs came out
10-24% short at 12-512 MiB; frozen on a new lease, the network's cycle 4.8% median (docs/gpu.md, "Run
dj"). ``queue=False`` keeps the max-min link (runs ch and ci's frozen tables).

**vLLM's custom all-reduce** (``custom_ar_cost``; a GPU mapping's ``all_reduce_kernel: custom``, where the
document gives ``nvlink.custom_all_reduce``): the kernel vLLM runs instead of NCCL for an all-reduce
under 8 MiB, its plan from ``rdusim.hw.custom_all_reduce``, simulated block by block by
``rdusim.sim.custom_ar`` (docs/gpu.md, "vLLM's custom all-reduce").

Not modelled: NCCL lowering its channel count for small messages (the count is known exactly,
``benchmarks/gpu/collectives_channels.py``; charging it did not improve the predictions:
docs/gpu.md, "Collectives"), a cluster size other than NCCL's default (``NCCL_CGA_CLUSTER_SIZE``:
plain CTAs share the link unevenly, run cd; docs/gpu.md "The Simple ramp"); CollNet, PCIe
topologies (no shipped document describes a PCIe node), multi-node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rdusim.hw.closed_network import closed_network_cycle
from rdusim.hw.custom_all_reduce import (
    VLLM_BLOCK_LIMIT,
    VLLM_MAX_BYTES,
    CustomArLink,
    CustomArPlan,
    custom_ar_applies,
    custom_ar_plan,
    custom_ar_wire_bytes,
)

US = 1e-6
GB = 1e9

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
PROTOCOLS = ("LL", "LL128", "Simple")
#: NCCL's order of algorithms (its tuner keeps the first of equal times)
ALGORITHMS = ("tree", "ring", "nvls")

#: tuning.cc ``baseLat`` (us): the fixed cost of one collective by (algorithm, protocol)
BASE_LATENCY_US = {
    ("tree", "LL"): 6.8, ("tree", "LL128"): 14.0, ("tree", "Simple"): 0.0,
    ("ring", "LL"): 6.6, ("ring", "LL128"): 14.0, ("ring", "Simple"): 8.4,
    ("nvls", "Simple"): 0.0,
}
#: tuning.cc ``hwLat[NCCL_HW_NVLINK]`` (us): per step on NVLink; NVLS's is its whole latency
HOP_LATENCY_US = {
    ("tree", "LL"): 0.6, ("tree", "LL128"): 1.25, ("tree", "Simple"): 28.0,
    ("ring", "LL"): 0.6, ("ring", "LL128"): 1.9, ("ring", "Simple"): 3.4,
    ("nvls", "Simple"): 23.0,
}
#: tuning.cc ``llMaxBws`` for Hopper on one node (GB/s): the most the LL protocol carries
LL_MAX_GBPS = 87.7
#: tuning.cc: LL128 carries 120 data bytes per 128 ("0.92 /*120.0/128.0*/")
LL128_SHARE = 0.92
#: tuning.cc: the tree's bus bandwidth, its LL share (1/3.8) and its single-node LL128 share (7/9)
TREE_SHARE, TREE_LL_SHARE, TREE_LL128_SHARE = 0.92, 1 / 3.8, 7 / 9
#: tuning.cc: the ratio it applies to NVLS's bus bandwidth
NVLS_SHARE = 5 / 6
#: tuning.cc ``treeCorrectionFactor`` [protocol][log2(bytes / 64)], 64 B to 256 MB: "Trees are
#: not perfectly sticking to the model for medium sizes"
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
#: [A] all-to-all (grouped send/recv): one ring step of its protocol, tuning.cc's base + hop
ALL_TO_ALL_LATENCY_US = {p: BASE_LATENCY_US[("ring", p)] + HOP_LATENCY_US[("ring", p)] for p in ("LL", "Simple")}
#: src/enqueue.cc: ``NCCL_PARAM(P2pLLThreshold, "P2P_LL_THRESHOLD", 16384)``, bytes per channel
P2P_LL_THRESHOLD = 16384
#: NCCL's p2p channels on one NVLink node (NCCL's INIT log on two H100s, 2.28.9: "32 p2p
#: channels, 32 p2p channels per peer", benchmarks/gpu/h100x2-20261125t-nccl-init.txt)
P2P_CHANNELS = 32


def p2p_ll_limit() -> int:
    """The most bytes per peer a grouped send/recv carries with LL (NCCL 2.28 ``src/enqueue.cc``,
    commit 01e6dd915fdd2627a7205f5aa1c7f14d46990226, addP2pToPlan: ``thresholdLL =
    nChannelsMax*ncclParamP2pLLThreshold()``, nChannelsMax = p2pnChannelsPerPeer): 512 KB."""
    return P2P_CHANNELS * P2P_LL_THRESHOLD


#: a p2p channel's chunk on NVLink: NCCL_P2P_NVL_CHUNKSIZE's default (src/init.cc; NCCL's INIT log on
#: two H200s: "P2P Chunksize set to 524288", benchmarks/gpu/h200x2-20261128ar-*; larger values are capped)
P2P_CHUNK_BYTES = 512 * 1024
#: NCCL_STEPS: the slots of a p2p connection's FIFO, one chunk each (src/include/device.h)
P2P_FIFO_STEPS = 8


def p2p_channels_a_peer(part: float, ranks: int, p2p_channels: int = P2P_CHANNELS,
                        chunk: int = P2P_CHUNK_BYTES) -> int:
    """The channels NCCL 2.28 gives one peer's ``part`` (src/enqueue.cc, scheduleP2pTasksToPlan and
    addP2pToPlan, the same in every stored 2.2x version): ``nChannelsMin`` is the p2p channels a peer
    (``p2pnChannelsPerPeer``: the p2p channels, its INIT log) halved while it times the ranks exceeds
    the p2p channels; a part starts on min(nChannelsMin, ceil(part / (chunk / 8))) channels and
    doubles them while a channel's part exceeds 32 chunks, up to the channels a peer."""
    per_peer = p2p_channels
    start = per_peer
    while start * ranks > p2p_channels and start > 1:
        start //= 2
    ch = max(1, min(start, math.ceil(part / (chunk / 8))))
    while max(chunk / 8, part / ch) > 32 * chunk and ch <= per_peer // 2:
        ch *= 2
    return ch


#: a p2p LL step: DEFAULT_LL_BUFFSIZE (NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x a
#: 16-byte ncclLLFifoLine: 512 KiB, src/include/device.h and comm.h) over NCCL_STEPS
P2P_LL_STEP_BYTES = 64 * 1024


def p2p_ll_channels(part: float, ranks: int, p2p_channels: int = P2P_CHANNELS) -> int:
    """The channels NCCL 2.28 gives one peer's LL ``part`` (src/enqueue.cc, addP2pToPlan): one for each eighth
    of an LL step (8 KiB, ``minPartSize = stepSize / 8`` on one node), up to ``nChannelsMin``
    (``p2p_channels_a_peer``'s start: 16 a peer on two GPUs, 4 on eight)."""
    return p2p_channels_a_peer(part, ranks, p2p_channels, P2P_LL_STEP_BYTES)


def channel_chunks(part: float, channels: int, chunk: int = P2P_CHUNK_BYTES) -> tuple[float, ...]:
    """One channel's chunks of a peer's ``part`` over ``channels`` (sendrecv.h's loop: whole chunks, the
    last what is left)."""
    share = part / channels
    out, done = [], 0.0
    while done < share:
        out.append(min(float(chunk), share - done))
        done += chunk
    return tuple(out)


#: a ring primitive call's slices: SlicePerChunk, ALLREDUCE_CHUNKSTEPS / ALLREDUCE_SLICESTEPS = 4 / 2 (the
#: all-gather's and reduce-scatter's alike; src/include/collectives.h); each ends with a post
RING_SLICES = 2
#: a ring channel's chunk: NCCL_BUFFSIZE 4 MiB (src/include/comm.h DEFAULT_BUFFSIZE) / NCCL_STEPS 8
#: x CHUNKSTEPS 4 (src/include/collectives.h ALLREDUCE_, ALLGATHER_, REDUCESCATTER_CHUNKSTEPS);
#: calcCollChunking never shrinks it for the ring (docs/gpu.md, "The Simple ramp")
RING_CHUNK_BYTES = 2 * 1024 * 1024


def ring_primitives(op: str, ranks: int) -> tuple[tuple[bool, int], ...]:
    """One loop of a ring channel: each primitive call as (puts its chunk on NVLink, loads plus
    stores a byte), in order (module docstring: runRing of all_reduce.h, all_gather.h,
    reduce_scatter.h)."""
    n = ranks
    if n < 2:
        raise ValueError(f"a ring needs at least 2 GPUs, got {ranks}")
    if op == "all_reduce":  # send, recvReduceSend, recvReduceCopySend, recvCopySend, recv
        return ((True, 2),) + ((True, 3),) * (n - 2) + ((True, 4),) + ((True, 3),) * (n - 2) + ((False, 2),)
    if op == "all_gather":  # copySend, recvCopySend, recv
        return ((True, 3),) + ((True, 3),) * (n - 2) + ((False, 2),)
    if op == "reduce_scatter":  # send, recvReduceSend, recvReduceCopy
        return ((True, 2),) + ((True, 3),) * (n - 2) + ((False, 3),)
    raise ValueError(f"no ring for {op!r}")


def memory_ops_per_wire_byte(op: str, ranks: int) -> float:
    """Loads plus stores a ring channel makes per byte it puts on NVLink (module docstring):
    a loop's operations over the chunks it puts on NVLink."""
    calls = ring_primitives(op, ranks)
    return sum(ops for _, ops in calls) / sum(on_link for on_link, _ in calls)


def ring_loop_chunks(op: str, nbytes: float, ranks: int, channels: int,
                     chunk: int = RING_CHUNK_BYTES) -> tuple[float, ...]:
    """One channel's chunk in each loop of a ring collective of ``nbytes`` (the all-reduce's S,
    the all-gather's output, the reduce-scatter's input): runRing's loop is ``channels x n x
    chunk`` of the all-reduce's buffer, ``channels x chunk`` of a rank's part (S / n) for
    all-gather and reduce-scatter; a loop's chunk is what is left over the channels (and ranks),
    at most ``chunk``."""
    if chunk <= 0 or channels < 1:
        raise ValueError(f"a ring needs a chunk > 0 and a channel, got chunk {chunk}, channels {channels}")
    if op == "all_reduce":
        total, spread = float(nbytes), channels * ranks
    else:
        total, spread = nbytes / ranks, channels
    out, done = [], 0.0
    while done < total:
        out.append(min(float(chunk), (total - done) / spread))
        done += spread * chunk
    return tuple(out)


@dataclass(frozen=True)
class RingChannels:
    """A GPU document's ``nvlink.ring``: NCCL's ring channels, what one moves, the link they share
    and the spread of their start (module docstring)."""

    channels: int
    channel_bytes_per_s: float   # one channel's loads plus stores per second
    link_bytes_per_s: float      # the NVLink the channels' sends share, per direction
    launch_skew_s: float
    post_s: float = 0.0          # a sending slice's post after its bytes (system fence, flag store), one channel
    post_per_channel_s: float = 0.0  # what each further channel adds to it (run ct: 1.28 us at 4, 2.34 at 24)

    def post_at(self, channels: int) -> float:
        """A sending slice's post with ``channels`` channels posting: ``post_s`` plus
        ``post_per_channel_s`` for each channel beyond the first."""
        return self.post_s + self.post_per_channel_s * (channels - 1)

    def start_s(self, channel: int, count: int) -> float:
        """When channel ``channel`` of ``count`` launched together starts: evenly across the launch
        skew, the first at 0 and the last at ``launch_skew_s`` (the ring's and the p2p channels')."""
        return self.launch_skew_s * channel / (count - 1) if count > 1 else 0.0


@dataclass(frozen=True)
class RingPlan:
    """What a ring Simple collective's channels do (module docstring): ``ring.channels`` channels,
    each loop of ``chunks`` running ``primitives`` ((on NVLink, operations a byte) a call)."""

    ring: RingChannels
    chunks: tuple[float, ...]
    primitives: tuple[tuple[bool, int], ...]


def ring_plan(op: str, nbytes: float, ranks: int, ring: RingChannels,
              chunk: int = RING_CHUNK_BYTES) -> RingPlan:
    """The plan of a ring Simple ``op`` of ``nbytes`` on ``ranks`` GPUs over ``ring``'s channels:
    its loops' chunks (``ring_loop_chunks``) and its primitive calls (``ring_primitives``)."""
    return RingPlan(ring, ring_loop_chunks(op, nbytes, ranks, ring.channels, chunk), ring_primitives(op, ranks))


@dataclass(frozen=True)
class P2pChannels:
    """A GPU document's ``nvlink.p2p``: what one p2p channel that both sends and receives does (NCCL
    2.28 ``src/device/sendrecv.h``: 10 warps send and 9 receive, at once; module docstring)."""

    send_bytes_per_s: float      # its send loop's rate, a chunk onto the peer's FIFO over NVLink
    receive_bytes_per_s: float   # its receive loop's rate, a chunk copied out of its own FIFO
    step_s: float                # a chunk's post after its bytes (fence and flag), fixed
    queue: bool = True           # the sending channels queue at the link (run dj); False: runs ch-ci's model

    def send_at(self, chunk: float, sending: int, link_bytes_per_s: float) -> float:
        """A chunk's send and post while ``sending`` channels send at once (``queue``): the channels a closed
        network at the link (``rdusim.hw.closed_network``), each its lone send and post less its bytes at
        the link, then its bytes there, which the sending channels share."""
        at_link = chunk / link_bytes_per_s
        alone = chunk / self.send_bytes_per_s + self.step_s
        return closed_network_cycle(max(alone - at_link, 0.0), at_link, sending)


@dataclass(frozen=True)
class P2pPlan:
    """What an all-to-all's p2p Simple channels do (module docstring): ``channels`` of them on the GPU
    (every peer's), each sending and receiving ``chunks``, their sends on ``ring``'s link, started
    across ``ring``'s launch skew."""

    p2p: P2pChannels
    ring: RingChannels
    channels: int
    chunks: tuple[float, ...]


def p2p_plan(nbytes: float, ranks: int, p2p: P2pChannels, ring: RingChannels,
             chunk: int = P2P_CHUNK_BYTES) -> P2pPlan:
    """The plan of an all-to-all of ``nbytes`` (its whole send buffer) on ``ranks`` GPUs: a peer's
    part S / ranks on its channels (``p2p_channels_a_peer``), every peer at once."""
    part = nbytes / ranks
    ch = p2p_channels_a_peer(part, ranks, chunk=chunk)
    return P2pPlan(p2p, ring, ch * (ranks - 1), channel_chunks(part, ch, chunk))


@dataclass(frozen=True)
class Fabric:
    """The GPUs' NVLink fabric as NCCL sees it.

    ``bus_bytes_per_s`` and ``latency_scale`` are the two quantities a measurement calibrates
    (the GPU document's ``nvlink.bus_bandwidth`` and ``nvlink.latency_scale``); ``nvls`` is
    whether the switch reduces (NVLink SHARP, the node document's ``nvls``); ``ll_bytes_per_s``
    the LL protocol's rate where the document gives the NCCL version's own (module docstring)."""

    bus_bytes_per_s: float
    latency_scale: float = 1.0
    nvls: bool = False
    ll_bytes_per_s: float | None = None  # the LL protocol's rate (the document's ``nvlink.ll_bandwidth``)
    ring: RingChannels | None = None     # a ring Simple collective channel by channel (``nvlink.ring``)
    p2p: P2pChannels | None = None       # an all-to-all's p2p Simple channels (``nvlink.p2p``; needs ``ring``)
    custom: CustomArLink | None = None   # vLLM's custom all-reduce (``nvlink.custom_all_reduce``)
    p2p_ll_channel_bytes_per_s: float | None = None  # one p2p channel's LL rate (``nvlink.p2p_ll_channel_bandwidth``)


@dataclass(frozen=True)
class CollectiveCost:
    """One collective of ``nbytes`` among ``ranks`` GPUs as NCCL runs it."""

    op: str
    nbytes: float            # the buffer: all-reduce's S, all-gather's whole output, ...
    ranks: int
    algorithm: str
    protocol: str
    latency_s: float
    wire_bytes: float        # bytes each GPU puts on NVLink
    bus_bytes_per_s: float   # the rate those bytes move at (protocol and algorithm shares applied)
    ring: RingPlan | None = None   # a ring Simple collective's channels, where the fabric has ``ring``
    p2p: P2pPlan | None = None     # an all-to-all's p2p Simple channels, where the fabric has ``p2p``
    custom: CustomArPlan | None = None  # vLLM's custom all-reduce in place of NCCL (``custom_ar_cost``)

    @property
    def time_s(self) -> float:
        """NCCL's tuner's time (its choice among algorithms and protocols); a collective with a
        ``ring`` or ``p2p`` plan takes what ``rdusim.sim`` simulates instead."""
        return self.latency_s + self.wire_bytes / self.bus_bytes_per_s

    @property
    def algbw(self) -> float:
        """nccl-tests' algorithm bandwidth, S / t."""
        return self.nbytes / self.time_s

    @property
    def busbw(self) -> float:
        """nccl-tests' bus bandwidth: algbw times its factor for the collective."""
        return self.algbw * BUSBW_FACTOR[self.op](self.ranks)


#: nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def wire_bytes(op: str, algorithm: str, nbytes: float, ranks: int) -> float:
    """Bytes each GPU sends over NVLink (see the module docstring)."""
    n = ranks
    if algorithm == "nvls":
        return nbytes * (n + 1) / n if op == "all_reduce" else nbytes
    if algorithm == "tree":
        return 2.0 * nbytes
    return nbytes * BUSBW_FACTOR[op](n)


def _enabled(op: str) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs tuning.cc enables for ``op`` on one NVSwitch node: the tree
    only for all-reduce; NVLS only with the Simple protocol."""
    if op == "all_to_all":
        return [("p2p", "LL"), ("p2p", "Simple")]
    pairs = []
    for algorithm in ALGORITHMS:
        if algorithm == "tree" and op != "all_reduce":
            continue
        for protocol in PROTOCOLS:
            if algorithm == "nvls" and protocol != "Simple":
                continue
            pairs.append((algorithm, protocol))
    return pairs


def _rate(op: str, algorithm: str, protocol: str, nbytes: float, bus: float, ranks: int,
          ll: float | None = None, ll_channel: float | None = None) -> float:
    """Bytes per second the wire bytes move at: tuning.cc's refinements of the bus bandwidth, and
    for a ring's Simple and LL128 the memory operations per wire byte relative to the
    all-reduce's (module docstring). ``ll``: the LL rate the document gives, else v2.19-2.20's;
    ``ll_channel``: one p2p channel's LL rate, where the document gives it."""
    if algorithm == "p2p" and protocol == "LL":
        # [A] a separate assumption, whatever ``ll`` is: NCCL's tuning model has no p2p entry, so
        # the rate is taken as the v2.19-2.20 ring all-gather's LL (a third of the bus, under
        # v2.19's 87.7 GB/s cap); ``nvlink.ll_bandwidth`` (the ring's LL rate) does not apply.
        # At most every peer's channels (NCCL's rule) at one channel's rate (run dk)
        rate = min(LL_MAX_GBPS * GB, bus / 3)
        if ll_channel is not None:
            rate = min(rate, p2p_ll_channels(nbytes / ranks, ranks) * (ranks - 1) * ll_channel)
        return rate
    ll_cap = LL_MAX_GBPS * GB if ll is None else ll
    if algorithm == "ring" and protocol == "LL" and ll is not None:
        # NCCL 2.28 tuning.cc (ring refinement): ``busBw = std::min(llMaxBw, busBw * .5)``, LL
        # carrying 4 data bytes in 8; on the shipped documents 0.5 x bus (172-185 GB/s) > 141
        return min(ll, bus * 0.5)
    if algorithm == "ring":
        if protocol == "LL":
            return min(ll_cap, bus * (1 / 4 if op == "all_reduce" else 1 / 3))
        ops = memory_ops_per_wire_byte("all_reduce", ranks) / memory_ops_per_wire_byte(op, ranks)
        return bus * ops * (LL128_SHARE if protocol == "LL128" else 1.0)
    if algorithm == "tree":
        rate = bus * TREE_SHARE
        if protocol == "LL":
            rate = min(rate * TREE_LL_SHARE, ll_cap)
        elif protocol == "LL128":
            rate *= TREE_LL128_SHARE
        size_class = int(math.log2(max(1.0, nbytes / 64)))
        table = TREE_CORRECTION[protocol]
        return rate * (table[size_class] if size_class < len(table) else 1.0)
    if algorithm == "nvls":
        return bus * NVLS_SHARE
    return bus  # all-to-all: every peer over its own NVSwitch path at the bus bandwidth


def _latency_us(op: str, algorithm: str, protocol: str, ranks: int) -> float:
    if algorithm == "p2p":
        return ALL_TO_ALL_LATENCY_US[protocol]
    base, hop = BASE_LATENCY_US[(algorithm, protocol)], HOP_LATENCY_US[(algorithm, protocol)]
    if algorithm == "nvls":
        return hop                                   # tuning.cc: latency = intraLat
    if algorithm == "tree":
        return base + 2 * (ranks - 1) * hop          # single node: a chain up and down
    steps = 2 * (ranks - 1) if op == "all_reduce" else ranks - 1
    return base + steps * hop


def candidates(op: str, nbytes: float, ranks: int, fabric: Fabric) -> list[CollectiveCost]:
    """Every (algorithm, protocol) NCCL would consider, in its order, with its cost."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r} (known: {', '.join(OPS)})")
    if ranks < 2:
        raise ValueError(f"a collective needs at least 2 GPUs, got {ranks}")
    out = []
    for algorithm, protocol in _enabled(op):
        if algorithm == "nvls" and not fabric.nvls:
            continue
        if algorithm == "p2p":  # NCCL's p2p rule picks the protocol; it is not tuned
            per_peer = nbytes / ranks
            if (protocol == "LL") != (per_peer <= p2p_ll_limit()):
                continue
        wire = wire_bytes(op, algorithm, nbytes, ranks)
        rate = _rate(op, algorithm, protocol, nbytes, fabric.bus_bytes_per_s, ranks, fabric.ll_bytes_per_s,
                     fabric.p2p_ll_channel_bytes_per_s)
        latency = _latency_us(op, algorithm, protocol, ranks) * US * fabric.latency_scale
        out.append(CollectiveCost(op, nbytes, ranks, algorithm, protocol, latency, wire, rate))
    return out


def collective_cost(op: str, nbytes: float, ranks: int, fabric: Fabric) -> CollectiveCost:
    """The (algorithm, protocol) NCCL's tuner picks: the least predicted time, first of equals;
    a ring Simple one carries its channels' plan where the fabric has ``ring``, a p2p Simple one
    (the all-to-all) its channels' plan where the fabric has ``p2p`` (and ``ring``: the link)."""
    best = None
    for cost in candidates(op, nbytes, ranks, fabric):
        if best is None or cost.time_s < best.time_s:
            best = cost
    assert best is not None
    if fabric.ring is not None and best.algorithm == "ring" and best.protocol == "Simple":
        best = replace(best, ring=ring_plan(op, nbytes, ranks, fabric.ring))
    if fabric.p2p is not None and fabric.ring is not None and best.algorithm == "p2p" and best.protocol == "Simple":
        best = replace(best, p2p=p2p_plan(nbytes, ranks, fabric.p2p, fabric.ring))
    return best


def custom_ar_cost(nbytes: float, ranks: int, fabric: Fabric, max_bytes: int = VLLM_MAX_BYTES,
                   stages: int | None = None, block_limit: int = VLLM_BLOCK_LIMIT) -> CollectiveCost | None:
    """vLLM's custom all-reduce of ``nbytes`` on ``ranks`` GPUs (``rdusim.hw.custom_all_reduce``), or
    None where vLLM would not run it (``custom_ar_applies``: the group, 16-byte packs, under
    ``max_bytes``) or the fabric does not describe it (no ``nvlink.custom_all_reduce``). Its latency is
    the kernel's own fixed time; ``rdusim.sim.custom_ar`` simulates the rest from ``custom``.
    ``stages`` and ``block_limit`` force another kernel than vLLM's choice (run cw's sweep)."""
    if fabric.custom is None or not custom_ar_applies(nbytes, ranks, max_bytes):
        return None
    plan = custom_ar_plan(nbytes, ranks, fabric.custom, stages, block_limit)
    wire = custom_ar_wire_bytes(nbytes, ranks, plan.stages)
    return CollectiveCost("all_reduce", nbytes, ranks, "custom", f"{plan.stages}-stage", fabric.custom.kernel_s,
                          wire, fabric.custom.read_bytes_per_s, custom=plan)
