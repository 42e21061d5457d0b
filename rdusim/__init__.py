"""rdusim: a discrete-event simulator and mapping explorer for LLM inference on dataflow sockets."""

__version__ = "0.1.0"
