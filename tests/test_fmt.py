"""tools/fmt.py: every figure a person reads, in one rendering each, and the one duration parser."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from tools import fmt


@pytest.mark.parametrize("value, digits, shown", [
    (0.125, 1, "12.5%"), (0, 1, "0.0%"), (1, 0, "100%"), (0.66666, 2, "66.67%"),
    (None, 1, "n/a"), (math.nan, 1, "n/a"), (math.inf, 1, "n/a"),
])
def test_percent_renders_a_fraction_and_unknown_as_unknown(value, digits, shown):
    assert fmt.percent(value, digits) == shown


def test_share_of_nothing_is_unknown_not_zero():
    assert (fmt.share(1, 8), fmt.share(0, 8), fmt.share(3, 0)) == ("12.5%", "0.0%", "n/a")


@pytest.mark.parametrize("value, shown", [(1234.5, "$1,234.50"), (0, "$0.00"), (None, "n/a"), (math.nan, "n/a")])
def test_dollars(value, shown):
    assert fmt.dollars(value) == shown


@pytest.mark.parametrize("seconds, shown", [
    (0, "0s"), (59.4, "59s"), (59.6, "1m00s"), (725, "12m05s"), (3599, "59m59s"), (3600, "1h00m"),
    (11040, "3h04m"), (-5, "0s"), (None, "n/a"),
])
def test_elapsed_is_clock_like(seconds, shown):
    assert fmt.elapsed(seconds) == shown


def test_hours_takes_seconds():
    assert (fmt.hours(112320), fmt.hours(0), fmt.hours(None)) == ("31.2 h", "0.0 h", "n/a")


@pytest.mark.parametrize("seconds, shown", [(1800, "30 min"), (120, "2 min"), (90, "90 s"), (60, "60 s"), (5.5, "5.5 s")])
def test_span_shows_a_setting_as_typed(seconds, shown):
    assert fmt.span(seconds) == shown


@pytest.mark.parametrize("text, seconds", [
    ("90", 90), ("90s", 90), ("10m", 600), ("2h", 7200), ("1d", 86400), ("1.5h", 5400), (" 24h ", 86400), ("0", 0),
])
def test_parse_duration_reads_the_hf_syntax(text, seconds):
    assert fmt.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", None, "h", "1w", "-1h", "1e3", "1 h", "1,5h", "1" * 10, "1.5.5", "1.", "١٢h"])
def test_parse_duration_refuses_what_is_not_one(text):
    assert fmt.parse_duration(text) is None


# tools/run/watchdog.py runs on HF alone, so it keeps its own copy of the parser: the two must read
# every input alike (the watchdog refuses a zero, as a setting of no length; fmt leaves that to
# its callers).
AGREEMENT = ["90", "90s", "10m", "2h", "1d", "1.5h", " 24h ", "0.5s", "999999999d", "0", "0s", "0.0h", "", "h",
             "1w", "-1h", "1e3", "1 h", "1,5h", "1" * 10, "1." + "5" * 10, "1.5.5", "1.", "+5m", "5M", "\u0661h"]


@pytest.mark.parametrize("text", AGREEMENT)
def test_the_watchdog_reads_a_duration_as_fmt_does(text):
    import click

    from tools.run import watchdog

    expected = fmt.parse_duration(text)
    if expected:
        assert watchdog.duration_seconds(text) == expected
    else:
        with pytest.raises(click.BadParameter):
            watchdog.duration_seconds(text)


def test_stamp_is_the_manifest_format_in_utc():
    plus_two = datetime(2026, 12, 4, 23, 17, 23, tzinfo=timezone(timedelta(hours=2)))
    assert fmt.stamp(plus_two) == "2026-12-04T21:17:23Z"
    assert fmt.utc_now().tzinfo is timezone.utc
