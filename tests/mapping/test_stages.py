"""The SRAM bound of a stage: resident weights once, plus its largest streamed item."""

from __future__ import annotations

from rdusim.mapping.plan import Chunk, Item
from rdusim.mapping.stages import _Draft, _max_item_load


def _draft(chunks: list[list[float]], resident: float) -> _Draft:
    return _Draft("s", "gemm", [], [Chunk(tuple(Item(1.0, (("hbm", b),)) for b in items)) for items in chunks],
                  resident_bytes=resident)


def test_resident_weights_are_not_counted_twice():
    # one item per chunk: chunk 0 loads weights (100) + its input (10); later chunks the input only
    assert _max_item_load(_draft([[110.0], [10.0], [10.0]], resident=100.0)) == 10.0


def test_the_first_item_of_a_chunk_counts_when_it_streams_the_input():
    # MoE: each chunk's first item streams the token tile (50) with the first expert (2),
    # then one expert (2) per item; the tile is the largest buffer
    assert _max_item_load(_draft([[52.0, 2.0, 2.0], [52.0, 2.0, 2.0]], resident=0.0)) == 52.0
