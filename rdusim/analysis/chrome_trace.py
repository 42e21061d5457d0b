"""Trace -> Chrome trace-event JSON (Perfetto, chrome://tracing): one process per socket,
one thread per resource (kernels, each stage's compute, HBM, DDR, P2P).

Owns: ``chrome_trace``. Imports: sim.trace. Writing the file is the CLI's job.
"""

from __future__ import annotations

from rdusim.sim.trace import Trace

_US = 1e6


def chrome_trace(trace: Trace) -> dict:
    events: list[dict] = []
    threads: dict[tuple[int, str], int] = {}

    def tid(socket: int, track: str) -> int:
        if (socket, track) not in threads:
            threads[(socket, track)] = len([k for k in threads if k[0] == socket]) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": socket, "tid": threads[(socket, track)],
                           "args": {"name": track}})
        return threads[(socket, track)]

    for socket in range(trace.sockets_simulated):
        events.append({"ph": "M", "name": "process_name", "pid": socket, "args": {"name": f"socket {socket}"}})
        for record in trace.kernels:
            events.append({"ph": "X", "pid": socket, "tid": tid(socket, "kernels"), "name": record.kernel,
                           "cat": record.layer_type, "ts": record.start_s * _US,
                           "dur": (record.end_s - record.start_s) * _US, "args": {"layer": record.layer}})
    for event in trace.events:
        events.append({"ph": "X", "pid": event.socket, "tid": tid(event.socket, event.track), "name": event.name,
                       "cat": event.kernel, "ts": event.start_s * _US, "dur": (event.end_s - event.start_s) * _US,
                       "args": {"bytes": event.nbytes, "work": event.work, "layer": event.layer}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"note": "each simulated layer stands for layer_multiplier identical layers",
                          "layer_multiplier": {str(k): v for k, v in trace.layer_multiplier.items()}}}
