"""Serving studies: deployments, workloads and traces, request-level runs and sweeps over rates,
their plots (``rdusim serve``, ``rdusim serve-sweep``).
"""
