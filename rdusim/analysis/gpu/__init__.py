"""GPU targets: per-kernel and end-to-end predictions for GPU mappings, their calibration against
H100 measurements, and SN40L-vs-GPU comparisons (``rdusim compare-hw``); the comparisons with the
committed measurements (``measured``, ``collectives``) and their table (``fidelity``:
``rdusim fidelity --gpu``).
"""
