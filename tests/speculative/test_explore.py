"""The mapping explorer on a speculative seed: the draft length and the draft model are genes."""

from __future__ import annotations

import pytest

from rdusim.analysis.explore.estimate import Evaluator, Problem
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.memory import memory_report
from rdusim.mapping.space import SD_DRAFT, SD_K, candidate_data, load_candidate, space_from_seed
from rdusim.model.speculative import expected_accepted
from tests.speculative.test_step import SD, _mapping


@pytest.fixture(scope="module")
def seed_path(tmp_path_factory):
    return _mapping(tmp_path_factory.mktemp("explore"), "seed", speculative=SD)


def _with(space, genome, **values):
    genome = list(genome)
    for name, value in values.items():
        genome[space.index[name]] = space.genes[space.index[name]].choices.index(value)
    return tuple(genome)


def test_k_and_the_draft_are_genes_and_the_seed_genome_spells_the_seed(seed_path):
    seed = load_mapping(seed_path)
    space = space_from_seed(seed)
    assert space.value(space.seed, SD_K) == 3 and space.value(space.seed, SD_DRAFT) == "llama-3.2-1b"
    # the packaged models sharing Llama-3.1-8B's vocabulary and smaller than it
    assert space.genes[space.index[SD_DRAFT]].choices == ("llama-3.2-1b", "llama-3.2-3b")
    assert 0 in space.genes[space.index[SD_K]].choices
    other = _with(space, space.seed, **{SD_K: 6, SD_DRAFT: "llama-3.2-3b"})
    candidate = load_candidate(seed, candidate_data(space, seed.document.data, other))
    assert candidate.spec.speculative.k == 6 and candidate.spec.speculative.draft == "llama-3.2-3b"
    assert candidate.spec.speculative.acceptance == seed.spec.speculative.acceptance


def test_estimate_counts_the_draft_in_hbm_and_the_accepted_tokens(seed_path):
    evaluator = Evaluator(Problem(str(seed_path)))
    space = evaluator.space
    k0 = _with(space, space.seed, **{SD_K: 0})
    sd_row, plain_row = evaluator.estimate([space.seed, k0])
    simulated = memory_report(build_plan(load_mapping(seed_path)))["hbm"]
    assert sd_row["hbm_weights_bytes"] == pytest.approx(simulated["weights"], rel=1e-12)
    assert sd_row["hbm_kv_bytes"] == pytest.approx(simulated["kv_cache"], rel=1e-12)
    plain = memory_report(build_plan(load_mapping(seed_path, overrides=["speculative.k=0"])))["hbm"]
    assert plain_row["hbm_weights_bytes"] == pytest.approx(plain["weights"], rel=1e-12)
    assert sd_row["draft_s"] > 0 and "draft_s" not in plain_row
    assert sd_row["tpot_s"] == pytest.approx(sd_row["step_s"] / expected_accepted(0.5, 3), rel=1e-12)
    assert plain_row["tpot_s"] == pytest.approx(plain_row["step_s"], rel=1e-12)
