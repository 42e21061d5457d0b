"""One test per failure class of issue 18 (request traces, generated workloads, GPU documents):
each bad input exits 2 with a located message, in under GUARD_S seconds, with no traceback and
nothing written, or exits 0 where the input is actually fine."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from rdusim.analysis.serving.workload import (
    MAX_OUTPUT_TOKENS,
    MAX_REQUESTS,
    LengthDistribution,
    parse_distribution,
    read_trace,
)
from rdusim.config.schema import MAX_TOKENS
from tests.hardening.conftest import ROOT, assert_input_error, files_under, run_cli

SERVE = "mappings/deepseek-r1/serve.yaml"
SLO = ("--slo-ttft-s", "1000", "--slo-tpot-ms", "10000")
PLAIN = "arrival_s,prompt_tokens,output_tokens\n"


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(needle))


# ---------------------------------------------------------------- 1. a trace that is not UTF-8 text
@pytest.mark.parametrize(("name", "data", "line"), [
    ("latin1.csv", (PLAIN + "0,10,5\n1,10,caf\xe9\n").encode("latin-1"), 3),
    ("utf16.csv", PLAIN.encode("utf-16"), 1),
    ("binary.jsonl", b'{"timestamp": 0, "input_length": 5, "output_length": 2}\n\x00\xff\xfe\n', 2),
])
def test_1_a_trace_that_is_not_utf8_is_located(workspace, name, data, line):
    trace = workspace / name
    trace.write_bytes(data)
    before = files_under(workspace)
    result = run_cli("serve", SERVE, "--trace", trace, *SLO, "--out", "out")
    assert_input_error(result, f"--trace: {trace}:{line}: not UTF-8 text (byte 0x")
    assert files_under(workspace) == before


def test_1_traces_go_through_the_document_reader(workspace):
    """The same reader as YAML: folders, FIFOs, empty files and oversized files are refused."""
    (workspace / "adir").mkdir()
    assert_input_error(run_cli("serve", SERVE, "--trace", "adir", *SLO), "--trace: adir: is a folder")
    (workspace / "empty.csv").write_text("\n\n")
    assert_input_error(run_cli("serve", SERVE, "--trace", "empty.csv", *SLO), "empty.csv:1: an empty trace")
    assert_input_error(run_cli("serve", SERVE, "--trace", "/dev/null", *SLO), "is not a regular file")


# ---------------------------------------------------------------- 2. generated workloads too big for memory
@pytest.mark.parametrize(("argv", "fragments"), [
    (["serve", SERVE, "--rate", "1e6", "--duration", "1e6"], ["--rate 1e+06 x --duration 1e+06 s: about 1e+12 requests",
                                                              "TiB of memory", f"the limit is {MAX_REQUESTS}"]),
    (["serve", SERVE, "--rate", "1", "--requests", "1000000000"], ["--requests 1000000000: about 1e+09 requests"]),
    (["serve-sweep", SERVE, "--rate", "1,2,1e9", "--duration", "3600"], ["--rate 1e+09 x --duration 3600 s"]),
    (["serve", SERVE, "--rate", "1", "--requests", "10", "--arrivals", "gamma:1e12"], ["--arrivals", "CV in (0, 10]"]),
])
def test_2_generated_workload_size_is_refused_up_front(workspace, argv, fragments):
    assert_input_error(run_cli(*argv, *SLO), *fragments)


def test_2_arrivals_past_the_horizon_are_refused_up_front(workspace):
    trace = workspace / "far.csv"
    trace.write_text(PLAIN + "0,1000,5\n20000000,1000,5\n")
    assert_input_error(run_cli("serve", SERVE, "--trace", trace, *SLO),
                       f"{trace}:3: this request arrives 2e+07 s after the first", "at most 1e+07 s")
    result = run_cli("serve", SERVE, "--trace", trace, "--time-scale", "0.1", *SLO)  # 2e6 s: replayed
    assert result.code == 0, result.err
    assert_input_error(run_cli("serve", SERVE, "--rate", "0.01", "--duration", "1e8", *SLO),
                       "--duration 1e+08 s: arrivals over more than 1e+07 s")
    assert_input_error(run_cli("serve", SERVE, "--rate", "1e-6", "--requests", "100", *SLO),
                       "--requests 100 at --rate 1e-06/s (about 1e+08 s of arrivals)")


def test_2_serving_rates_past_the_horizon_name_the_serving_key(workspace):
    """Found while running (the deployment's step tables are built first): no time guard. The
    KV transfers are the request engine's events bounded by the horizon, so the message names
    the serving file's interconnect.bandwidth: its line, or the --set option that gave it."""
    option = "interconnect.bandwidth=1e-300 B/s"
    result = run_cli("serve", SERVE, "--rate", "1", "--requests", "20", "--set", option, *SLO)
    assert result.code == 2 and "Traceback" not in result.err, result.err
    assert (f"{SERVE} (--set {option!r}): interconnect.bandwidth: an event would end at t=inf s, past the "
            "simulator's horizon") in result.err
    serving = workspace / SERVE
    serving.write_text(re.sub(r"bandwidth: .*", 'bandwidth: "1e-300 B/s"', serving.read_text(), count=1))
    result = run_cli("serve", SERVE, "--rate", "1", "--requests", "20", *SLO)
    assert result.code == 2 and "Traceback" not in result.err, result.err
    line = _line_of(serving, "bandwidth:")
    assert f"{SERVE}:{line}: interconnect.bandwidth: an event would end at t=inf s" in result.err


def test_2_a_trace_longer_than_the_limit_is_refused_at_its_row(workspace, monkeypatch):
    import rdusim.analysis.serving.workload as workload  # noqa: PLC0415

    monkeypatch.setattr(workload, "MAX_REQUESTS", 3)
    trace = workspace / "long.csv"
    trace.write_text(PLAIN + "".join(f"{i},10,5\n" for i in range(5)))
    with pytest.raises(workload.ConfigError, match=rf"^{re.escape(str(trace))}:5: more than 3 requests"):
        read_trace(trace)


# ---------------------------------------------------------------- 3. extreme distribution parameters
@pytest.mark.parametrize(("text", "fragment"), [
    ("lognormal:1e18,3", f"a token count must be in [1, {MAX_TOKENS}]"),
    ("lognormal:1000,1e6", "SIGMA in [0, 10]"),
    ("lognormal:1000,nan", "finite"),
    ("uniform:1,1e30", f"a token count must be a whole number in [1, {MAX_TOKENS}]"),
    ("fixed:99999999999999999999", f"in [1, {MAX_TOKENS}]"),
    ("lognormal:1e308,1e308", "a token count must be in"),
])
def test_3_distribution_parameters_are_checked_where_parsed(workspace, text, fragment):
    assert_input_error(run_cli("serve", SERVE, "--rate", "1", "--requests", "10", "--prompt-tokens", text, *SLO),
                       "--prompt-tokens: ", fragment)
    assert_input_error(run_cli("serve-sweep", SERVE, "--rate", "1", "--requests", "10", "--output-tokens", text,
                               *SLO), "--output-tokens: ", fragment.replace(str(MAX_TOKENS), str(MAX_OUTPUT_TOKENS)))


def test_3_samples_never_overflow():
    """The widest accepted distribution stays in [1, MAX_TOKENS] without a numpy warning."""
    widest = parse_distribution(f"lognormal:{MAX_TOKENS},10", "--prompt-tokens")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        draws = widest.sample(np.random.default_rng(0), 100_000)
    assert draws.min() >= 1 and draws.max() == MAX_TOKENS
    assert LengthDistribution("uniform", (1, MAX_TOKENS)).sample(np.random.default_rng(0), 10).max() <= MAX_TOKENS


def test_3_trace_token_counts_are_bounded(workspace):
    trace = workspace / "huge.csv"
    trace.write_text(PLAIN + "0,10,5\n1,99999999999999999999999,5\n")
    assert_input_error(run_cli("serve", SERVE, "--trace", trace, *SLO),
                       f"{trace}:3:2: prompt_tokens: expected a whole number of tokens in [1, {MAX_TOKENS}]")
    trace.write_text(PLAIN + "0,10,5\n1,10,16777216\n")  # an output whose decode steps would run for hours
    assert_input_error(run_cli("serve", SERVE, "--trace", trace, *SLO),
                       f"{trace}:3:3: output_tokens: expected a whole number of tokens in [0, {MAX_OUTPUT_TOKENS}]")
    trace.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1' + "0" * 5000 + "}\n")
    assert_input_error(run_cli("serve", SERVE, "--trace", trace, *SLO), f"{trace}:1:")


# ---------------------------------------------------------------- 4. absurd GPU sizes
@pytest.mark.parametrize(("document", "old", "new", "key"), [
    ("hw_configs/h100.yaml", "sms: 132 ", "sms: 1000000000 ", "compute.sms"),
    ("hw_configs/h100-8.yaml", "gpus: 8", "gpus: 100000000", "gpus"),
    ("mappings/llama-3.1-70b/decode-h100x8.yaml", "tp: 8", "tp: 4294967296", "tp"),
])
def test_4_absurd_gpu_sizes_are_refused_at_load(workspace, document, old, new, key):
    path = workspace / document
    path.write_text(path.read_text().replace(old, new))
    line = _line_of(path, new.strip())
    mapping = document if document.startswith("mappings") else (
        "mappings/llama-3.1-70b/decode-h100x8.yaml" if "-8" in document else "mappings/llama-3.1-8b/decode-h100.yaml")
    assert_input_error(run_cli("simulate", mapping), f"{path.name}:{line}: {key}: Input should be less than or equal")
    assert_input_error(run_cli("validate", document), f"{document}:{line}: {key}")


@pytest.mark.parametrize(("old", "new"), [('"3.35 TB/s"', '"1e-300 B/s"'), ('"989.4 TFLOP/s"', '"1e-300 FLOP/s"'),
                                          ('"0.352 us"', '"1e300 s"')])
def test_4_absurd_gpu_rates_stop_at_the_horizon(workspace, old, new):
    """The GPU engine's events go through the same horizon as the SN40L engine's: an exit 2
    naming the GPU document, not minutes of events at float precision's limit."""
    path = workspace / "hw_configs/h100.yaml"
    path.write_text(path.read_text().replace(old, new))
    result = run_cli("simulate", "mappings/llama-3.1-8b/decode-h100.yaml", "--format", "json")
    assert_input_error(result, f"{path}: an event would end at t=", "past the simulator's horizon")


def test_4_a_gpu_prompt_past_every_context_is_refused(workspace):
    assert_input_error(run_cli("simulate", "mappings/llama-3.1-8b/prefill-h100.yaml", "--seq-len", "100000000"),
                       "prefill-h100.yaml (--seq-len 100000000): workload.seq_len: 100000000 tokens exceed "
                       "llama-3.1-8b's context of 131072 tokens")


# ---------------------------------------------------------------- 5. model vs the GPU mapping's kernels
def _model(workspace: Path, name: str) -> Path:
    """A model the GPU kernels do not cover: MLA with a dense FFN, or GQA with MoE."""
    if name == "mla-dense":
        text = (ROOT / "rdusim/config/models/deepseek-r1.yaml").read_text()
        text = re.sub(r"  moe:\n(    .*\n)+", "", text).replace("first_dense_layers: 3 ", "first_dense_layers: 61 ")
    else:
        text = (ROOT / "rdusim/config/models/llama-3.1-8b.yaml").read_text().replace(
            "first_dense_layers: 32 ", "first_dense_layers: 2\n  moe: {experts: 8, experts_per_token: 2, "
            "shared_experts: 0, intermediate: 2048}\n ")
    path = workspace / f"{name}.yaml"
    path.write_text(text.replace("name: deepseek-r1", f"name: {name}").replace("name: llama-3.1-8b", f"name: {name}"))
    return path


@pytest.mark.parametrize("mapping", ["mappings/llama-3.1-8b/decode-h100.yaml", "mappings/llama-3.1-8b/prefill-h100.yaml",
                                     "mappings/deepseek-r1/decode-h200x8.yaml"])
@pytest.mark.parametrize(("model", "what"), [("mla-dense", "MLA attention and a dense FFN"),
                                             ("gqa-moe", "GQA attention and a mixture-of-experts FFN")])
def test_5_a_model_the_gpu_kernels_do_not_cover_is_located_at_model(workspace, mapping, model, what):
    model_file = _model(workspace, model)
    path = workspace / mapping
    text = path.read_text()
    path.write_text(re.sub(r"^model: .*$", f"model: {model_file}", text, flags=re.MULTILINE))
    line = _line_of(path, "model: ")
    assert_input_error(run_cli("simulate", mapping), f"{mapping}:{line}: model: {model} has {what}")
    assert_input_error(run_cli("validate", mapping), f"{mapping}:{line}: model:")


def test_5_gpu_cross_document_rules_are_located(workspace):
    decode = "mappings/llama-3.1-8b/decode-h100.yaml"
    assert_input_error(run_cli("simulate", decode, "--batch", "100000"),
                       f"{decode} (--batch 100000): workload.batch: batch 100000 does not fit on H100-SXM5-80GB")
    # an MLA prefill is modelled (gpu_mla.mla_prefill_attention_kernels), but takes no MTP tokens: the
    # decode mapping's accepted_tokens_per_step is refused at its line once phase is prefill
    mla = "mappings/deepseek-r1/decode-h200x8.yaml"
    assert_input_error(run_cli("simulate", mla, "--set", "phase=prefill"),
                       f"{mla}:{_line_of(workspace / mla, 'accepted_tokens_per_step:')}: "
                       "workload.accepted_tokens_per_step: 1.875 needs a decode mapping")
    path = workspace / decode
    path.write_text(path.read_text().replace("batch: 32", "batch: 4096"))
    assert_input_error(run_cli("simulate", decode), f"{decode}:{_line_of(path, 'batch: 4096')}: workload.batch:")


# ---------------------------------------------------------------- 6. a byte-order mark
@pytest.mark.parametrize(("name", "text"), [
    ("excel.csv", PLAIN + "0,1000,10\n1.5,2000,20\n"),
    ("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1000,10\n"
                  "2023-11-16 18:15:48.1805900,2000,20\n"),
    ("mooncake.jsonl", '{"timestamp": 0, "input_length": 1000, "output_length": 10}\n'
                       '{"timestamp": 1500, "input_length": 2000, "output_length": 20}\n'),
])
def test_6_a_trace_with_a_byte_order_mark_is_read(workspace, name, text):
    trace = workspace / name
    trace.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    workload = read_trace(trace)
    assert workload.arrival_s.tolist() == [0.0, 1.5]
    assert workload.prompt_tokens.tolist() == [1000, 2000] and workload.output_tokens.tolist() == [10, 20]
    result = run_cli("serve", SERVE, "--trace", trace, *SLO)
    assert result.code == 0, result.err
    assert "requests 2: completed 2" in result.out


# ---------------------------------------------------------------- 7. a document of the wrong kind
def test_7_compare_hw_given_a_gpu_mapping_says_which_kind_it_takes(workspace):
    gpu = "mappings/llama-3.1-8b/decode-h100.yaml"
    result = run_cli("compare-hw", gpu, "--hw", "hw_configs/h100.yaml", "--seq-len", "4096")
    assert_input_error(result, f"{gpu}:{_line_of(workspace / gpu, 'kind:')}: kind: compare-hw MAPPING takes a "
                               "document of kind 'mapping', this one is 'gpu_mapping'", "in --hw")
    assert len([line for line in result.err.splitlines() if line.strip()]) == 2  # the header and one line
    result = run_cli("compare-hw", "mappings/llama-3.1-8b/decode.yaml", "--hw", SERVE, "--seq-len", "4096")
    assert_input_error(result, f"{SERVE}:5: kind: --hw takes a document of kind 'node' or 'gpu'")


@pytest.mark.parametrize(("argv", "expected", "got"), [
    (["simulate", SERVE], "mapping", "serving"),
    (["serve", "mappings/deepseek-r1/decode.yaml", "--rate", "1", *SLO], "serving", "mapping"),
    (["simulate", "mappings/llama-3.1-8b/decode.yaml", "--hw", "hw_configs/sn40l.yaml"], "node", "socket"),
])
def test_7_any_document_of_another_kind_is_one_line(workspace, argv, expected, got):
    result = run_cli(*argv)
    assert_input_error(result, f"kind: expected a document of kind {expected!r} here, this one is {got!r}")
    assert len([line for line in result.err.splitlines() if line.strip()]) == 2


# ---------------------------------------------------------------- serving node counts and grids
@pytest.mark.parametrize(("override", "key"), [
    ("decode.nodes=1000000000", "decode.nodes"),
    ("prefill.nodes=100000000", "prefill.nodes"),
    ("decode.kv_grid=[1024, 2048, 99999999999]", "decode.kv_grid"),
    (f"prefill.grid={list(range(1, 1000))}", "prefill.grid"),
    ("decode.max_context=4294967296", "decode.max_context"),
])
def test_serving_sizes_are_bounded_at_their_key(workspace, override, key):
    assert_input_error(run_cli("serve", SERVE, "--rate", "1", "--requests", "10", "--set", override, *SLO),
                       f"{SERVE} (--set {override!r}): {key}: ")


# ---------------------------------------------------------------- sweep grids: comma lists and their product
def test_sweep_grids_are_bounded(workspace):
    many = ",".join(str(r) for r in range(1, 1502))
    assert_input_error(run_cli("serve-sweep", SERVE, "--rate", many, "--requests", "5", *SLO),
                       "--rate: 1501 values; at most 1000")
    assert_input_error(run_cli("serve-sweep", ",".join([SERVE] * 40), "--rate", ",".join(["1"] * 30), "--requests",
                               "5", *SLO), "DEPLOYMENTS x --rate: 40 x 30 = 1200 serving runs; at most 1000")
    assert_input_error(run_cli("sweep", "mappings/llama-3.1-8b/decode.yaml", "--seq-len", many),
                       "--seq-len: 1501 values; at most 1000")
    assert_input_error(run_cli("serve-sweep", SERVE, "--rate", "1,nope", "--requests", "5", *SLO),
                       "--rate: expected comma-separated requests per second")


def test_serving_overrides_keep_numbers_numbers(workspace):
    """A serving file's decode.accepted_tokens_per_step reaches the decode mapping as a number."""
    result = run_cli("serve", SERVE, "--rate", "1", "--requests", "20", "--set",
                     "decode.accepted_tokens_per_step=1e300", *SLO)
    assert "Traceback" not in result.err and "a valid number" not in result.err, result.err


def test_compare_hw_overrides_name_their_option(workspace):
    result = run_cli("compare-hw", "mappings/llama-3.1-8b/decode.yaml", "--hw", "hw_configs/sn40l-16.yaml",
                     "--seq-len", "8192", "--policy", "snapstream", "--compression", "1e300")
    assert result.code == 0, result.err  # 1e300 reaches the mapping as a number: the row says why it is empty
    assert "(compression 1e+300)" in result.out


def test_3_accepted_tokens_per_step_is_bounded(workspace):
    """A step accepts at most its proposals + 1 tokens: 1e300 is refused at its key, not simulated."""
    mapping = ROOT / "mappings/deepseek-r1/decode.yaml"
    result = run_cli("simulate", mapping, "--set", "workload.accepted_tokens_per_step=1.0e+300")
    assert_input_error(result, "workload.accepted_tokens_per_step", "less than or equal to 65")
