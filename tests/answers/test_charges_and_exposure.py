"""What decides money (issue 34, deliveries 1 and 5): container_charge_versions and demurrage_exposure,
recomputed independently from the raw tables of the history world (and the tariff seed's CSV) and
compared with the models, row by row."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pytest

from tests.support.dagster import LakeReader

TARIFFS_CSV = Path(__file__).resolve().parents[2] / "sql" / "seeds" / "demurrage_tariffs.csv"
STALE_AFTER_HOURS = 48  # the terminal data's stated age (demurrage_exposure's header)
AMOUNT = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")


def known_zone(name: str | None) -> str | None:
    """`name` when it is an IANA zone, else None (an unknown name counts as missing)."""
    if not name:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name


def local(instant: datetime | None, zone: str) -> date | None:
    """The date `instant` falls on in `zone`."""
    return None if instant is None else instant.astimezone(ZoneInfo(zone)).date()


RAW_TABLES = ("containers", "shipments", "departed_shipments", "terminals", "container_charge_history")


def read_all(reader: LakeReader, queries: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each query (as dicts by column name), on one read-only session."""
    out = {}
    with reader.store.connect(read_only=True) as con:
        for name, sql in queries.items():
            cursor = con.execute(sql)
            names = [column[0] for column in cursor.description]
            out[name] = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return out


def raw_tables(reader: LakeReader) -> dict[str, list[dict[str, Any]]]:
    """Every row of the raw tables the two models read."""
    return read_all(reader, {table: f"select * from ocean_tracking.{table}" for table in RAW_TABLES})


@dataclass
class Container:
    """A container's facts from the raw tables, with its zones."""

    row: dict[str, Any]
    shipment: dict[str, Any]
    firms_code: str | None
    pod_zone: str | None  # the zone the API sent (container's, else shipment's); None: not sent
    inland_zone: str | None  # the API's final_destination_timezone

    @property
    def pod_read_zone(self) -> str:
        """Where the service's POD timestamps are read: the API's zone, else as is (UTC)."""
        return self.pod_zone or "UTC"

    @property
    def inland_read_zone(self) -> str:
        """Where the service's inland timestamps are read."""
        return self.inland_zone or "UTC"

    @property
    def tracking_state(self) -> str:
        """The shipment's tracking state."""
        if self.shipment.get("left_account_at") is not None:
            return "left_account"
        return "tracking_stopped" if self.shipment.get("line_tracking_stopped_at") else "tracking"


def containers(raw: dict[str, list[dict[str, Any]]]) -> dict[str, Container]:
    """Every raw container with its shipment (and whether it left the account), terminal and zones."""
    shipments = {row["id"]: dict(row) for row in raw["shipments"]}
    for departed in raw["departed_shipments"]:
        shipments[departed["shipment_id"]]["left_account_at"] = departed["left_account_at"]
    terminals = {row["id"]: row for row in raw["terminals"]}
    out = {}
    for row in raw["containers"]:
        container_id = row["id"]
        shipment = shipments.get(row["shipment_id"], {})
        terminal = terminals.get(row.get("pod_terminal_id") or shipment.get("pod_terminal_id"), {})
        out[container_id] = Container(
            row=row,
            shipment=shipment,
            firms_code=terminal.get("firms_code"),
            pod_zone=known_zone(row.get("pod_timezone")) or known_zone(shipment.get("pod_timezone")),
            inland_zone=known_zone(row.get("final_destination_timezone")),
        )
    return out


def versions(raw: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The raw charge history's versions of each container, oldest first."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted(raw["container_charge_history"], key=lambda row: row["_dlt_valid_from"]):
        out[row["container_id"]].append(row)
    return out


def blocking_holds(holds: str | None) -> list[str]:
    """The names of the holds with status `hold` in the service's `name:status; ...` text."""
    names = []
    for item in (holds or "").split("; "):
        name, _, status = item.rpartition(":")
        if item and status.lower() == "hold":
            names.append(name)
    return sorted(names)


def fee_total(fees: str | None) -> tuple[str | None, Decimal | None]:
    """The currency and total of the service's `type amount currency; ...` text when it holds one currency
    (a `total` line is the total), else (None, None)."""
    if not fees:
        return None, None
    lines = [item.split(" ") for item in fees.split("; ")]
    currencies = {line[2].upper() for line in lines}
    if len(currencies) != 1:
        return None, None
    amounts = [(line[0], Decimal(line[1])) for line in lines if AMOUNT.match(line[1])]
    totals = [amount for kind, amount in amounts if kind == "total"]
    return currencies.pop(), sum(totals) if totals else sum(amount for _, amount in amounts)


def expected_versions(raw: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """container_charge_versions, recomputed from the raw charge history and containers."""
    facts = containers(raw)
    lfds = ["pickup_lfd", "pickup_lfd_terminal", "pickup_lfd_line", "pickup_lfd_rail", "inland_lfd"]
    rows = []
    for container_id, seen in versions(raw).items():
        container = facts[container_id]
        for number, version in enumerate(seen, start=1):
            previous = seen[number - 2] if number > 1 else None
            holds = blocking_holds(version["holds"])
            currency, total = fee_total(version["fees"])
            changed = None
            if previous is not None:
                names = {
                    "lfd": lfds,
                    "holds": ["holds"],
                    "fees": ["fees"],
                    "availability": ["available_for_pickup"],
                }
                changed = ", ".join(
                    n for n, cols in names.items() if any(version[c] != previous[c] for c in cols)
                )
            rows.append({
                "container_id": container_id, "valid_from": version["_dlt_valid_from"],
                "version_number": number, "version_count": len(seen),
                "is_current": version["_dlt_valid_to"] is None,
                "pickup_lfd_local": local(version["pickup_lfd"], container.pod_read_zone),
                "pickup_lfd_terminal_local": local(version["pickup_lfd_terminal"], container.pod_read_zone),
                "pickup_lfd_line_local": local(version["pickup_lfd_line"], container.pod_read_zone),
                "pickup_lfd_rail_local": local(version["pickup_lfd_rail"], container.inland_read_zone),
                "inland_lfd_local": local(version["inland_lfd"], container.inland_read_zone),
                "blocking_hold_names": "; ".join(holds) or None, "blocking_hold_count": len(holds),
                "fees_currency": currency, "fees_total": total, "changed_fields": changed,
            })  # fmt: skip
    return rows


def tariffs() -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The seed's tariffs by (applies_to, scac_or_terminal): their day bands."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    with TARIFFS_CSV.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            out[row["applies_to"], row["scac_or_terminal"]].append(row)
    return out


def accrued(bands: list[dict[str, Any]], chargeable_days: int) -> Decimal:
    """What `chargeable_days` days past the last free day cost under a tariff: each day at its band's rate."""
    total = Decimal(0)
    for day in range(1, chargeable_days + 1):
        for band in bands:
            if int(band["from_chargeable_day"]) <= day and (
                not band["to_chargeable_day"] or day <= int(band["to_chargeable_day"])
            ):
                total += Decimal(band["rate_per_day"])
    return total


def expected_exposure(raw: dict[str, list[dict[str, Any]]], now: datetime) -> list[dict[str, Any]]:
    """demurrage_exposure at `now`, recomputed from the raw tables and the seed's CSV, for the containers
    whose zone the API sent (the others' zone comes from the models' vendored reference)."""
    facts, seen_versions, tariff_bands = containers(raw), versions(raw), tariffs()
    rows = []
    for container_id, container in facts.items():
        raw = container.row
        inland = raw["pod_rail_loaded_at"] is not None or raw["ind_rail_unloaded_at"] is not None
        if container.pod_zone is None:
            continue
        if inland:
            arrived, zone, read = (
                raw["ind_rail_unloaded_at"],
                container.inland_zone or container.pod_zone,
                container.inland_read_zone,
            )
            left = raw["final_destination_full_out_at"] or raw["empty_terminated_at"]
        else:
            arrived, zone, read = raw["pod_discharged_at"], container.pod_zone, container.pod_read_zone
            left = raw["pod_full_out_at"] or raw["empty_terminated_at"]
        if arrived is None:
            continue
        arrival, today = local(arrived, read), local(now, zone)
        last = min(local(left, read) or today, today)
        tariff = (("terminal", container.firms_code) if not inland and ("terminal", container.firms_code) in tariff_bands
                  else ("carrier", container.shipment.get("shipping_line_scac")))  # fmt: skip
        bands = tariff_bands.get(tariff)
        ended_at = container.shipment.get("left_account_at") or container.shipment.get(
            "line_tracking_stopped_at"
        )
        history = seen_versions[container_id]
        for number in range((last - arrival).days + 1):
            day = arrival + timedelta(days=number)
            version = next(v for i, v in enumerate(history)
                           if (i == 0 or local(v["_dlt_valid_from"], zone) <= day)
                           and (v["_dlt_valid_to"] is None or local(v["_dlt_valid_to"], zone) > day))  # fmt: skip
            seen_after = local(version["_dlt_valid_from"], zone) > day
            if inland:
                lfd = local(version["pickup_lfd_rail"], read) or local(version["inland_lfd"], read)
            else:
                lfd = local(version["pickup_lfd"], read)
            currency, total = fee_total(version["fees"])
            holds = blocking_holds(version["holds"])
            chargeable = None
            if bands:
                chargeable = max(
                    (day - (lfd or arrival + timedelta(days=int(bands[0]["free_calendar_days"])))).days, 0
                )
            tracking_ended = container.tracking_state != "tracking" and (
                ended_at is None or local(ended_at, zone) <= day
            )
            day_end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=ZoneInfo(zone))
            checked = raw["terminal_checked_at"]
            stale = left is None and (
                checked is None or (min(now, day_end) - checked) > timedelta(hours=STALE_AFTER_HOURS)
            )
            reasons = [container.tracking_state] * tracking_ended + ["terminal_data_stale"] * stale
            rows.append({
                "container_id": container_id, "local_date": day, "day_number": number,
                "exposure_place": "inland_rail" if inland else "pod_terminal",
                "shipping_line_scac": container.shipment.get("shipping_line_scac"),
                "last_free_day_local": lfd,
                "free_days_left": None if lfd is None else max((lfd - day).days + 1, 0),
                "days_past_last_free_day": None if lfd is None else max((day - lfd).days, 0),
                "charges_seen_after_day": seen_after,
                "available_for_pickup": None if seen_after else version["available_for_pickup"],
                "holds": None if seen_after else version["holds"],
                "blocking_hold_names": None if seen_after else "; ".join(holds) or None,
                "blocking_hold_count": None if seen_after else len(holds),
                "fees": None if seen_after else version["fees"],
                "fees_currency": None if seen_after else currency,
                "fees_total": None if seen_after else total,
                "estimated_chargeable_days": chargeable,
                "estimated_accrued_amount": None if chargeable is None else accrued(bands, chargeable),
                "estimated_currency": bands[0]["currency"] if bands else None,
                "tariff": f"{tariff[0]} {tariff[1]}" if bands else None,
                "trusted": not reasons, "untrusted_reason": ", ".join(reasons) or None,
            })  # fmt: skip
    return rows


def model_rows(reader: LakeReader) -> tuple[list[dict[str, Any]], list[dict[str, Any]], datetime]:
    """container_charge_versions's and demurrage_exposure's rows, and the instant the view counted today
    from (its query's `current_timestamp`)."""
    rows = read_all(reader, {
        "versions": "select * from analytics.container_charge_versions",
        "exposure": "select *, current_timestamp as counted_at from analytics.demurrage_exposure",
        "now": "select current_timestamp as now",
    })  # fmt: skip
    exposure = rows["exposure"]
    now = exposure[0]["counted_at"] if exposure else rows["now"][0]["now"]
    for row in exposure:
        basis = row.pop("estimate_basis")
        row["tariff"] = basis and re.match(r"estimate: demurrage_tariffs (\w+ \w+) \(", basis).group(1)
    return rows["versions"], exposure, now


# ---- the tests -----------------------------------------------------------------------------------------


@dataclass
class Money:
    """The two models' rows and their recomputation, once for the module."""

    versions: list[dict[str, Any]]
    expected_versions: list[dict[str, Any]]
    exposure: list[dict[str, Any]]
    expected_exposure: list[dict[str, Any]]
    scac: dict[str, str | None]


@pytest.fixture(scope="module")
def money(history) -> Money:
    """container_charge_versions and demurrage_exposure as built and as recomputed (at the view's now)."""
    charge_versions, exposure, now = model_rows(history)
    raw = raw_tables(history)
    return Money(
        versions=charge_versions,
        expected_versions=expected_versions(raw),
        exposure=exposure,
        expected_exposure=expected_exposure(raw, now),
        scac={
            key: container.shipment.get("shipping_line_scac") for key, container in containers(raw).items()
        },
    )


def test_charge_versions_match_the_raw_history(money):
    expected = {(row["container_id"], row["valid_from"]): row for row in money.expected_versions}
    model = {(row["container_id"], row["valid_from"]): row for row in money.versions}
    assert len(model) >= 20
    assert model.keys() == expected.keys()
    for key, row in expected.items():
        assert {name: model[key][name] for name in row} == row, key
    # the history holds changes of every kind to compare
    changed = " ".join(row["changed_fields"] or "" for row in expected.values())
    assert all(kind in changed for kind in ("lfd", "holds", "fees", "availability"))
    assert sum(row["blocking_hold_count"] > 0 for row in expected.values()) >= 5
    assert sum(row["fees_total"] is not None for row in expected.values()) >= 20


def test_demurrage_exposure_matches_the_raw_tables_and_the_tariffs(money):
    expected = {(row["container_id"], row["local_date"]): row for row in money.expected_exposure}
    model = {(row["container_id"], row["local_date"]): row for row in money.exposure}
    assert len(expected) >= 20
    assert expected.keys() <= model.keys()
    assert len(expected) >= 0.9 * len(model)  # all but the containers zoned by the vendored reference
    for key, row in expected.items():
        assert {name: model[key][name] for name in row} == row, key
    values = list(expected.values())
    assert sum((row["days_past_last_free_day"] or 0) > 0 for row in values) >= 20
    assert sum(row["fees_total"] is not None for row in values) >= 20
    assert sum(bool(row["estimated_accrued_amount"]) for row in values) >= 20
    assert {row["tariff"].split()[0] for row in values if row["tariff"]} == {"carrier", "terminal"}


def per_carrier_figures(
    exposure: list[dict[str, Any]], charge_versions: list[dict[str, Any]], scac: dict[str, str | None]
) -> dict[str | None, dict[str, Any]]:
    """Per SCAC: containers past their last free day (their last exposure row, the day they left or today,
    is past the LFD known that day), the fees last reported (the total of each container's last version with
    a fee total) and the estimate accrued by that last row."""
    figures: dict[str | None, dict[str, Any]] = defaultdict(
        lambda: {"past_lfd": 0, "fees": Decimal(0), "estimated": Decimal(0)}
    )
    last: dict[str, dict[str, Any]] = {}
    for row in exposure:
        if row["container_id"] not in last or row["local_date"] > last[row["container_id"]]["local_date"]:
            last[row["container_id"]] = row
    for row in last.values():
        figures[scac[row["container_id"]]]["past_lfd"] += (row["days_past_last_free_day"] or 0) > 0
        figures[scac[row["container_id"]]]["estimated"] += row["estimated_accrued_amount"] or 0
    last_fees: dict[str, dict[str, Any]] = {}
    for row in charge_versions:
        if row["fees_total"] is not None and (
            row["container_id"] not in last_fees
            or row["valid_from"] > last_fees[row["container_id"]]["valid_from"]
        ):
            last_fees[row["container_id"]] = row
    for row in last_fees.values():
        figures[scac[row["container_id"]]]["fees"] += row["fees_total"]
    return dict(figures)


def test_per_carrier_money_figures_match(money):
    zoned = {row["container_id"] for row in money.expected_exposure}
    model = per_carrier_figures(
        [row for row in money.exposure if row["container_id"] in zoned], money.versions, money.scac
    )
    recomputed = per_carrier_figures(money.expected_exposure, money.expected_versions, money.scac)
    assert model == recomputed
    assert sum(figure["past_lfd"] for figure in recomputed.values()) >= 20
    assert sum(figure["fees"] for figure in recomputed.values()) > 0


@pytest.mark.parametrize(
    ("days", "amount"),
    [(0, 0), (3, 300), (4, 400), (7, 925), (8, 1225), (10, 1825)],
)
def test_the_recomputed_estimate_adds_a_tariffs_bands_day_by_day(days, amount):
    bands = [{"from_chargeable_day": "1", "to_chargeable_day": "4", "rate_per_day": "100"},
             {"from_chargeable_day": "5", "to_chargeable_day": "7", "rate_per_day": "175"},
             {"from_chargeable_day": "8", "to_chargeable_day": "", "rate_per_day": "300"}]  # fmt: skip
    assert accrued(bands, days) == amount


def test_on_a_world_still_at_its_terminals_stale_terminal_data_is_not_trusted(built):
    """The suite's small world stopped with containers still at their terminals, their terminal data last
    checked then: today those days are past the stated age, so the view marks them untrusted, as the
    recomputation does (the history world's containers have all left, so its rows never go stale)."""
    _, exposure, now = model_rows(built)
    expected = {(row["container_id"], row["local_date"]): row for row in expected_exposure(raw_tables(built), now)}
    model = {(row["container_id"], row["local_date"]): row for row in exposure}
    assert len(expected) >= 20 and expected.keys() <= model.keys()
    for key, row in expected.items():
        assert {name: model[key][name] for name in row} == row, key
    stale = [row for row in expected.values() if "stale" in (row["untrusted_reason"] or "")]
    assert len(stale) >= 20 and not any(row["trusted"] for row in stale)
