import pytest

from rdusim.units import GiB, format_bytes, parse_quantity


@pytest.mark.parametrize(("text", "dimension", "value"), [
    ("64 GiB", "bytes", 64 * GiB), ("520 MiB", "bytes", 520 * 2**20), ("1.6 TB/s", "bytes_per_s", 1.6e12),
    ("250 GB/s", "bytes_per_s", 250e9), ("638 TFLOP/s", "flop_per_s", 638e12), ("2 us", "time", 2e-6),
    ("1.2 GHz", "frequency", 1.2e9), ("450 ns", "time", 450e-9),
])
def test_parse_quantity(text, dimension, value):
    assert parse_quantity(text, dimension) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(("text", "dimension", "message"), [
    ("64", "bytes", "quantity with a unit"), ("1.6 TB", "bytes_per_s", "not a bytes_per_s unit"),
    ("fast", "time", "quantity with a unit"), ("3 GiB/s", "bytes", "not a bytes unit"),
])
def test_parse_quantity_rejects(text, dimension, message):
    with pytest.raises(ValueError, match=message):
        parse_quantity(text, dimension)


def test_format_bytes():
    assert format_bytes(3 * GiB) == "3.00 GiB"
    assert format_bytes(12) == "12 B"
