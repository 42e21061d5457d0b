"""Exception hierarchy: every error a user can cause is an ``RdusimError``.

Owns: RdusimError, ConfigError, MappingError, SimulationError, HorizonError. Imports: nothing.
The CLI turns any ``RdusimError`` into a message on stderr and exit code 2.
"""

from __future__ import annotations


class RdusimError(Exception):
    """Base class of every error caused by user input (files, options, mappings)."""


class ConfigError(RdusimError):
    """One or more problems in a YAML document or option, one line per issue.

    ``issues`` holds the individual messages, each already located
    (``file:line: key: what is wrong``).
    """

    def __init__(self, issues: list[str] | str) -> None:
        self.issues = [issues] if isinstance(issues, str) else list(issues)
        super().__init__("\n".join(self.issues))


class MappingError(RdusimError):
    """A mapping that validates as YAML but cannot run on the hardware (with the numbers)."""

    def __init__(self, issues: list[str] | str) -> None:
        self.issues = [issues] if isinstance(issues, str) else list(issues)
        super().__init__("\n".join(self.issues))


class SimulationError(RdusimError):
    """The simulation reached an impossible state (a deadlock, a negative duration)."""


class HorizonError(SimulationError):
    """An event would end past the simulator's horizon (``rdusim.sim.resources.HORIZON_S``):
    a rate too small or a duration too large; the caller names the input that set it."""
