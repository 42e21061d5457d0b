"""Calibration and fidelity: fit the calibration constants to the published figures, the figures
themselves, and every figure against the model (``rdusim calibrate``, ``rdusim fidelity``).
"""
