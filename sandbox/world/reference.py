"""Reference data shared by all accounts: ports, terminals and shipping lines.

Loaded from `sandbox/reference_data/` (ports.csv, terminals.csv and the vendor's shipping-lines.csv) and
rendered as JSON:API resources shaped like the live captures (string port coordinates, `attributes.id`
repeated on ports and terminals, `provided_data` and `facility_type` on terminals).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

from .identifiers import reference_uuid, stable_int

DATA_DIR = Path(__file__).resolve().parent.parent / "reference_data"

Support = Literal["supported", "unsupported", "unknown"]


@dataclass(frozen=True)
class Port:
    locode: str
    name: str
    city: str
    state: str | None
    state_abbr: str | None
    country_code: str
    country: str
    latitude: float
    longitude: float
    time_zone: str
    lat_text: str
    lon_text: str

    @cached_property
    def id(self) -> str:
        return reference_uuid("port", self.locode)

    @property
    def is_us(self) -> bool:
        return self.country_code == "US"


@dataclass(frozen=True)
class Terminal:
    id: str
    name: str
    nickname: str
    firms_code: str | None
    smdg_code: str | None
    port: str  # locode
    city: str
    state: str | None
    state_abbr: str | None
    zip: str | None
    street: str | None
    country: str
    provided: tuple[bool, ...]
    facility_type: str = "ocean_terminal"


@dataclass(frozen=True)
class Carrier:
    scac: str
    name: str
    short_name: str
    bol_prefix: str | None
    support: Support
    container_support: bool
    alternative_scacs: tuple[str, ...] = ()
    owner_codes: tuple[str, ...] = ()
    tracking_url: str | None = None
    contact_url: str | None = None
    bl_support: bool = True
    booking_support: bool = True
    provided_data: tuple[tuple[str, object], ...] | None = None

    def supports(self, request_type: str | None) -> bool:
        """Whether the line accepts tracking requests of `request_type` (live `*_tracking_support` flags)."""
        if request_type == "container":
            return self.container_support
        if request_type == "booking_number":
            return self.booking_support
        return self.bl_support

    @cached_property
    def id(self) -> str:
        return reference_uuid("shipping_line", self.scac)

    @property
    def container_owner(self) -> str:
        return self.owner_codes[0] if self.owner_codes else f"{self.scac[:3]}U"


# Container owner (BIC) codes by carrier: first one is used when generating containers.
OWNER_CODES: dict[str, tuple[str, ...]] = {
    "APLU": ("APZU", "APLU"), "ANNU": ("ANNU",), "COSU": ("CBHU", "CSNU", "COSU"), "CMDU": ("CMAU", "CGMU"),
    "EGLV": ("EGHU", "EISU", "EMCU"), "SUDU": ("SUDU",), "HLCU": ("HLXU", "HLBU"), "HDMU": ("HDMU",),
    "MAEU": ("MSKU", "MRKU", "MAEU"), "MATS": ("MATU",), "MSCU": ("MSCU", "MEDU", "MSDU"),
    "ONEY": ("ONEU",), "OOLU": ("OOLU", "OOCU"), "PCIU": ("PCIU",), "SAFM": ("SAFU",),
    "YMLU": ("YMLU", "YMMU"), "WHLC": ("WHLU",), "ZIMU": ("ZIMU", "ZCSU"), "CLAM": ("CMCU",), "TEST": ("TSTU",),
    "SEAU": ("SEAU",), "SMLU": ("SMLU",),
}
TRACKING_URLS: dict[str, str] = {
    "MAEU": "https://www.maersk.com/tracking/${BLNUM}",
    "MSCU": "https://www.msc.com/en/track-a-shipment?trackingNumber=${BLNUM}",
    "HLCU": "https://www.hapag-lloyd.com/en/online-business/track/track-by-booking-solution.html?blno=${BLNUM}",
    "CMDU": "https://www.cma-cgm.com/ebusiness/tracking/search?SearchBy=BL&Reference=${BLNUM}",
    "ANNU": "https://www.anl.com.au/ebusiness/tracking/search?SearchBy=BL&Reference=${BLNUM}",
    "ONEY": "https://ecomm.one-line.com/one-ecom/manage-shipment/cargo-tracking?trakNoParam=${BLNUM}",
}
TERMINAL_PROVIDED_FIELDS = (
    "pickup_lfd", "pod_full_out_at", "available_for_pickup", "fees_at_pod_terminal", "holds_at_pod_terminal",
    "pickup_appointment_at", "location_at_pod_terminal", "pod_full_out_chassis_number",
)
SHIPPING_LINE_PROVIDED = {
    "ssl_lfd": False, "seal_number": False, "weight_in_lbs": False, "equipment_type": True,
    "pod_arrived_at": True, "pod_full_out_at": True, "equipment_height": True, "equipment_length": True,
    "pod_discharged_at": True, "seal_number_notes": "", "empty_terminated_at": True, "weight_in_lbs_notes": "",
    "equipment_type_notes": "", "pod_arrived_at_notes": "", "pod_full_out_at_notes": "",
    "equipment_height_notes": "", "equipment_length_notes": "", "pod_discharged_at_notes": "",
    "empty_terminated_at_notes": "", "final_destination_full_out_at": True,
    "final_destination_full_out_at_notes": "",
}
US_ZIPS = {
    "USBAL": "21222", "USBOS": "02210", "USHOU": "77571", "USJAX": "32226", "USLGB": "90802", "USLAX": "90731",
    "USMIA": "33132", "USMOB": "36602", "USMSY": "70130", "USNYC": "07201", "USOAK": "94607", "USPHL": "19148",
    "USPEF": "33316", "USPOT": "33605", "USSAV": "31408", "USSEA": "98134", "USTIW": "98421", "USORF": "23505",
}
# Inland rail ramps (served as `terminal` resources, facility_type rail_terminal) by inland port:
# name, nickname, firms code, street, zip.
RAIL_TERMINALS: dict[str, tuple[str, str, str, str, str]] = {
    "USCHI": ("BNSF Logistics Park Chicago", "LPC", "Z901", "26664 S Baseline Rd", "60410"),
    "USMEM": ("Intermodal Gateway Memphis", "IGM", "M212", "4000 Forrest Rd", "38118"),
    "USDAL": ("Dallas Intermodal Terminal", "DIT", "T112", "4801 Langdon Rd", "75241"),
    "USKCK": ("Kansas City Intermodal Facility", "KCIF", "K631", "3100 Kansas Ave", "66106"),
    "USATL": ("Fairburn Intermodal Terminal", "Fairburn", "A611", "7000 Oakley Industrial Blvd", "30213"),
    "USCMH": ("Rickenbacker Intermodal Terminal", "Rickenbacker", "C311", "2351 Rohr Rd", "43137"),
    "USDET": ("Detroit Intermodal Terminal", "Livernois", "D214", "6750 W Warren Ave", "48210"),
    "USCLE": ("Cleveland Intermodal Terminal", "Maple Heights", "C622", "5200 Warner Rd", "44125"),
}
_FOREIGN_TERMINAL_STYLES = ("{} Container Terminal", "{} International Container Terminal", "{} Gateway Terminal")


def _blank(value: str | None) -> str | None:
    return value if value not in (None, "") else None


@dataclass
class Reference:
    """All reference records plus their resource renderings and carrier inference."""

    ports: dict[str, Port] = field(default_factory=dict)
    terminals: dict[str, Terminal] = field(default_factory=dict)
    carriers: dict[str, Carrier] = field(default_factory=dict)

    @classmethod
    def load(cls, data_dir: Path = DATA_DIR) -> Reference:
        """Read the CSV files in `data_dir` and build ports, terminals and carriers."""
        ref = cls()
        with (data_dir / "ports.csv").open(newline="") as fh:
            for row in csv.DictReader(fh):
                ref.ports[row["locode"]] = Port(
                    locode=row["locode"], name=row["name"], city=row["city"], state=_blank(row["state"]),
                    state_abbr=_blank(row["state_abbr"]), country_code=row["country_code"],
                    country=row["country"], latitude=float(row["latitude"]), longitude=float(row["longitude"]),
                    time_zone=row["time_zone"], lat_text=row["latitude"], lon_text=row["longitude"])
        ref._load_terminals(data_dir)
        ref._load_carriers(data_dir)
        return ref

    def _load_terminals(self, data_dir: Path) -> None:
        with (data_dir / "terminal-addresses.csv").open(newline="") as fh:
            addresses = {row["Firms Code"]: row for row in csv.DictReader(fh)}
        with (data_dir / "terminals.csv").open(newline="") as fh:
            for row in csv.DictReader(fh):
                addr = addresses.get(row["Firms Code"], {})
                port = self.ports[row["Port Code"]]
                tid = reference_uuid("terminal", f"{row['Port Code']}:{row['Firms Code']}")
                h = stable_int("terminal", tid)
                self.terminals[tid] = Terminal(
                    id=tid, name=row["Terminal Name"], nickname=row["Terminal Nickname"],
                    firms_code=row["Firms Code"], smdg_code=_smdg(row["Terminal Nickname"], h),
                    port=port.locode, city=addr.get("City") or row["City"], state=port.state, state_abbr=row["State"],
                    zip=addr.get("Zip") or US_ZIPS.get(port.locode), street=addr.get("Street") or None,
                    country="United States",
                    provided=tuple(bool((h >> i) & 1) or i in (1, 2, 4) for i in range(len(TERMINAL_PROVIDED_FIELDS))))
        for locode, (name, nickname, firms, street, zip_code) in RAIL_TERMINALS.items():
            port = self.ports[locode]
            tid = reference_uuid("terminal", f"{locode}:rail")
            self.terminals[tid] = Terminal(
                id=tid, name=name, nickname=nickname, firms_code=firms, smdg_code=None, port=locode,
                city=port.city, state=port.state, state_abbr=port.state_abbr, zip=zip_code, street=street,
                country=port.country, provided=(False,) * len(TERMINAL_PROVIDED_FIELDS), facility_type="rail_terminal")
        for port in self.ports.values():
            if port.is_us:
                continue
            count = 1 + stable_int("terminals", port.locode) % 2
            for k in range(count):
                tid = reference_uuid("terminal", f"{port.locode}:{k}")
                h = stable_int("terminal", tid)
                name = _FOREIGN_TERMINAL_STYLES[(h + k) % len(_FOREIGN_TERMINAL_STYLES)].format(port.name)
                nickname = "".join(w[0] for w in name.split() if w[0].isalpha()).upper()
                self.terminals[tid] = Terminal(
                    id=tid, name=name, nickname=nickname, firms_code=None, smdg_code=_smdg(nickname, h),
                    port=port.locode, city=port.city, state=port.state, state_abbr=port.state_abbr, zip=None,
                    street=None, country=port.country, provided=(False,) * len(TERMINAL_PROVIDED_FIELDS))

    def _load_carriers(self, data_dir: Path) -> None:
        """The live `/shipping_lines` rows (shipping-lines-live.json, SCAC order, with the CLI's
        bol_prefix), then the rows of the vendor's shipping-lines.csv the live list lacks (first row of
        a repeated SCAC wins; a SCAC that is a live alternative SCAC is that line)."""
        with (data_dir / "shipping-lines-live.json").open() as fh:
            live = json.load(fh)
        for row in live:
            scac = row["scac"]
            bl, bk, ct = (bool(row[f"{k}_tracking_support"]) for k in ("bill_of_lading", "booking_number",
                                                                      "container_number"))
            self.carriers[scac] = Carrier(
                scac=scac, name=row["name"], short_name=row["short_name"], bol_prefix=row.get("bol_prefix"),
                support="supported" if (bl or bk or ct) else "unsupported", container_support=ct,
                alternative_scacs=tuple(row.get("alternative_scacs") or ()),
                owner_codes=OWNER_CODES.get(scac, ()), tracking_url=row.get("tracking_url"),
                contact_url=row.get("contact_url"), bl_support=bl, booking_support=bk,
                provided_data=tuple((row.get("provided_data") or SHIPPING_LINE_PROVIDED).items()))
        extra: list[Carrier] = []
        with (data_dir / "shipping-lines.csv").open(newline="") as fh:
            for row in csv.DictReader(fh):
                scac = row["SCAC"].strip().upper()
                if not scac or self.carrier(scac) is not None or any(c.scac == scac for c in extra):
                    continue  # the vendor list repeats some SCACs; the first row (or the live row) wins
                support = row["Support"].strip().lower()
                ok = support in ("yes", "partial")
                extra.append(Carrier(
                    scac=scac, name=row["Full Name"].strip(), short_name=row["Nickname"].strip(),
                    bol_prefix=_blank(row["BOL Prefix"].strip()), support="supported" if ok else "unsupported",
                    container_support=ok and "container" not in row["Notes"].lower(),
                    owner_codes=OWNER_CODES.get(scac, ()), tracking_url=TRACKING_URLS.get(scac),
                    bl_support=ok, booking_support=ok))
        for c in extra:
            self.carriers[c.scac] = c
        self.carriers = dict(sorted(self.carriers.items()))

    # ----- lookups -------------------------------------------------------------------------------

    @cached_property
    def ports_by_id(self) -> dict[str, Port]:
        return {p.id: p for p in self.ports.values()}

    @cached_property
    def terminals_by_port(self) -> dict[str, list[Terminal]]:
        out: dict[str, list[Terminal]] = {}
        for t in self.terminals.values():
            out.setdefault(t.port, []).append(t)
        return out

    @cached_property
    def carriers_by_id(self) -> dict[str, Carrier]:
        return {c.id: c for c in self.carriers.values()}

    @cached_property
    def supported_carriers(self) -> list[Carrier]:
        """Real carriers a seeded shipment may use (supported, not the TEST line)."""
        return [c for c in self.carriers.values() if c.support == "supported" and c.scac != "TEST"]

    def find_port(self, id_or_locode: str) -> Port | None:
        """A port by UUID or UN/LOCODE (case-insensitive), as `GET /ports/{id}` accepts both."""
        if not id_or_locode:
            return None
        return self.ports.get(id_or_locode.upper()) or self.ports_by_id.get(id_or_locode.lower())

    def carrier(self, scac: str | None) -> Carrier | None:
        """The carrier of a SCAC or one of its alternative SCACs."""
        if not scac:
            return None
        scac = scac.strip().upper()
        if scac in self.carriers:
            return self.carriers[scac]
        return next((c for c in self.carriers.values() if scac in c.alternative_scacs), None)

    def carrier_support(self, scac: str | None) -> Support:
        """supported / unsupported (recognised, e.g. "On roadmap") / unknown, for tracking-request 422s."""
        carrier = self.carrier(scac)
        return carrier.support if carrier else "unknown"

    def detect_carrier(self, number: str) -> Carrier | None:
        """Carrier inferred from a BL prefix, SCAC prefix or container owner code; None if ambiguous/unknown.

        The TEST carrier is never auto-detected: test numbers must be sent with `scac: TEST`.
        """
        text = "".join(number.split()).replace("-", "").upper()
        best: tuple[int, Carrier] | None = None
        for c in self.carriers.values():
            if c.scac == "TEST":
                continue
            for prefix in (c.scac, c.bol_prefix, *c.alternative_scacs, *c.owner_codes):
                if prefix and text.startswith(prefix) and len(text) > len(prefix) + 3 and (
                        best is None or len(prefix) > best[0]):
                    best = (len(prefix), c)
        return best[1] if best else None

    # ----- resources -----------------------------------------------------------------------------

    def port_resource(self, port: Port) -> dict:
        """A `port` resource like the live capture (string lat/lon, attributes.id, terminals)."""
        terms = self.terminals_by_port.get(port.locode, [])
        return {
            "id": port.id, "type": "port",
            "attributes": {
                "id": port.id, "name": port.name, "code": port.locode, "state_abbr": port.state_abbr,
                "city": port.city, "country_code": port.country_code, "latitude": port.lat_text,
                "longitude": port.lon_text, "time_zone": port.time_zone,
            },
            "relationships": {"terminals": {"data": [{"id": t.id, "type": "terminal"} for t in terms]}},
        }

    def terminal_resource(self, t: Terminal) -> dict:
        """A `terminal` resource like the live capture (provided_data, facility_type, attributes.id)."""
        provided: dict[str, object] = {}
        for name, flag in zip(TERMINAL_PROVIDED_FIELDS, t.provided, strict=True):
            provided[name] = flag
            provided[f"{name}_notes"] = ""
        port = self.ports[t.port]
        return {
            "id": t.id, "type": "terminal",
            "attributes": {
                "id": t.id, "nickname": t.nickname, "name": t.name, "firms_code": t.firms_code,
                "smdg_code": t.smdg_code, "bic_facility_code": None, "provided_data": provided,
                "street": t.street, "city": t.city, "state": t.state, "state_abbr": t.state_abbr, "zip": t.zip,
                "country": t.country, "facility_type": t.facility_type,
            },
            "relationships": {"port": {"data": {"id": port.id, "type": "port"}}},
        }

    def shipping_line_resource(self, c: Carrier) -> dict:
        """A `shipping_line` resource with the live extras (provided_data, tracking_url, contact_url)."""
        provided = dict(c.provided_data) if c.provided_data is not None else dict(SHIPPING_LINE_PROVIDED)
        return {
            "id": c.id, "type": "shipping_line",
            "attributes": {
                "scac": c.scac, "name": c.name, "provided_data": provided,
                "tracking_url": c.tracking_url, "contact_url": c.contact_url,
                "alternative_scacs": list(c.alternative_scacs), "short_name": c.short_name,
                "bill_of_lading_tracking_support": c.bl_support, "booking_number_tracking_support": c.booking_support,
                "container_number_tracking_support": c.container_support,
            },
        }


def _smdg(nickname: str, h: int) -> str:
    letters = "".join(ch for ch in nickname.upper() if ch.isalpha())
    letters = (letters + "TMLX")[:3]
    return letters + "ABCDEFGHJKLMNPRSTUVWXYZ"[h % 23]
