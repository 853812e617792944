"""``tooltrain bench train``: the table and ratios it prints, from given measurements (the benchmark's own
numbers are timings, which no test can pin)."""

from __future__ import annotations

from train.commands.bench.train import ratio, table
from train.engine.bench_train import Measurement


def test_table_and_ratios_from_measurements():
    packed = Measurement(
        "tooltrain packed", steps=2, real_tokens=3000, slots=3072, seconds=2.0, cpu_seconds=3.0, peak_memory_mib=600.4
    )
    padded = Measurement(
        "tooltrain padded", steps=2, real_tokens=3000, slots=4000, seconds=6.0, cpu_seconds=12.0, peak_memory_mib=610
    )
    failed = Measurement("trl packed", error="ValueError: no")
    assert table([packed, padded, failed]).splitlines() == [
        (
            "path              steps  real tokens  seconds  tokens/s  cpu s  tokens/cpu s  padding eff  MFU"
            "  peak mem MiB  vs trl"
        ),
        (
            "tooltrain packed      2        3,000      2.0    1500.0    3.0        1000.0        97.7%  n/a"
            "           600       -"
        ),
        (
            "tooltrain padded      2        3,000      6.0     500.0   12.0         250.0        75.0%  n/a"
            "           610       -"
        ),
        (
            "trl packed            -            -        -         -      -             -            -    -"
            "             -       -"
        ),
    ]
    assert ratio(packed, padded) == "3.00x tokens/s, 4.00x tokens/cpu s"
    assert (ratio(packed, failed), ratio(failed, packed)) == ("n/a", "n/a")
