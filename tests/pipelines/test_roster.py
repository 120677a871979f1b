"""What a complete listing may retire (pure unit: the share guard)."""

from __future__ import annotations

import logging

from pipelines.source.pages import ALWAYS_BELIEVED, MAX_DEPARTED_SHARE, believable


def test_a_few_departures_are_believed_whatever_the_share():
    assert believable(set(map(str, range(ALWAYS_BELIEVED))), set(map(str, range(ALWAYS_BELIEVED))), "shipments")


def test_up_to_the_share_is_believed():
    held = set(map(str, range(1000)))
    assert believable(set(map(str, range(int(MAX_DEPARTED_SHARE * 1000)))), held, "shipments")


def test_a_listing_that_would_empty_the_account_retires_nothing_with_one_warning(caplog):
    held = set(map(str, range(1000)))
    with caplog.at_level(logging.WARNING, logger="pipelines.source.pages"):
        assert not believable(set(map(str, range(900))), held, "shipments")
    [record] = caplog.records
    assert "900 fewer shipments" in record.getMessage() and "nothing was retired" in record.getMessage()
