"""Serving traces for Perfetto / chrome://tracing: one process per node, prefill slices, decode
steps and each request's stay on its decode node.

Owns: ``serving_trace``. Imports: run (``ServingResult``), stream (``last_finish``). Writes no files (the CLI
writes the JSON).
"""

from __future__ import annotations

from rdusim.analysis.serving.run import ServingResult
from rdusim.analysis.serving.stream import TRACE_REQUESTS, last_finish

_US = 1e6


def serving_trace(result: ServingResult, max_requests: int = TRACE_REQUESTS) -> dict:
    """Chrome trace events: one process per node; prefill slices, decode steps, and each
    request's stay on its decode node (async spans); the first ``max_requests`` requests (a
    streamed result kept the first ``TRACE_REQUESTS`` and the steps up to their last finish)."""
    events: list[dict] = []
    if result.head is not None:
        frame, r, steps = result.head
        if max_requests > len(frame) and len(frame) == TRACE_REQUESTS:
            raise ValueError(f"a streamed result keeps the first {TRACE_REQUESTS} requests for the trace")
        frame = frame.head(max_requests)
    else:
        frame, r, steps = result.requests.head(max_requests), result.run.requests, result.run.steps
    index = {n["node"]: n["index"] for n in result.run.nodes}
    for node in result.run.nodes:
        pid = node["index"]
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{node['node']} ({node['role']})"}})
        for tid, name in ((1, "prefill"), (2, "decode steps"), (3, "requests")):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
    for row in frame.itertuples():
        i = row.request
        if row.prefill_node:
            start = r["prefill_start_s"][i]
            events.append({"ph": "X", "pid": index[row.prefill_node], "tid": 1, "name": f"req {i}", "cat": "prefill",
                           "ts": start * _US, "dur": (r["first_token_s"][i] - start) * _US,
                           "args": {"prompt_tokens": int(row.prompt_tokens)}})
        if row.decode_node and r["admitted_s"][i] == r["admitted_s"][i]:
            pid = index[row.decode_node]
            common = {"pid": pid, "tid": 3, "name": f"req {i}", "cat": "request", "id": int(i)}
            events.append(common | {"ph": "b", "ts": r["admitted_s"][i] * _US,
                                    "args": {"output_tokens": int(row.output_tokens)}})
            events.append(common | {"ph": "e", "ts": r["finish_s"][i] * _US})
    limit = r["finish_s"][frame["request"].to_numpy()]
    horizon = last_finish(limit)
    for node, start, duration, active, bucket in zip(steps["node"], steps["start_s"], steps["duration_s"],
                                                     steps["active"], steps["bucket"], strict=True):
        if start > horizon:
            break
        events.append({"ph": "X", "pid": int(node), "tid": 2, "name": f"batch {int(bucket)}", "cat": "decode",
                       "ts": float(start) * _US, "dur": float(duration) * _US, "args": {"active": int(active)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
