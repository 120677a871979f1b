"""Word lists for real-sounding generated names (vessels, customer companies, ref numbers)."""

from __future__ import annotations

# Vessel name families by operator, mirroring how the big carriers name their ships.
VESSEL_PREFIXES: dict[str, str] = {
    "MAERSK": "MAERSK {}", "MSC": "MSC {}", "CMA CGM": "CMA CGM {}", "COSCO": "COSCO SHIPPING {}",
    "EVER": "EVER {}", "ONE": "ONE {}", "HAPAG": "{} EXPRESS", "ZIM": "ZIM {}", "HAMBURG SUD": "CAP {}",
    "MATSON": "{}", "SEASPAN": "SEASPAN {}", "YM": "YM {}", "HMM": "HMM {}", "OOCL": "OOCL {}",
}

VESSEL_WORDS: tuple[str, ...] = (
    "AURORA", "HARMONY", "VALOR", "SERENITY", "MERIDIAN", "ORION", "TRIUMPH", "GENEVA", "ALTAIR",
    "BRILLIANCE", "CARDINAL", "DESTINY", "EMINENCE", "FORTUNE", "GALAXY", "HORIZON", "INTEGRITY",
    "JUBILEE", "KESTREL", "LIBERTY", "MAJESTY", "NOBILITY", "OCEANIA", "PIONEER", "QUASAR", "RADIANCE",
    "SOVEREIGN", "TENACITY", "UNITY", "VANGUARD", "WISDOM", "ZENITH", "ANTWERP", "BREMEN", "CHENNAI",
    "DALIAN", "ESSEN", "FLORENCE", "GDANSK", "HOUSTON", "ISTANBUL", "JAKARTA", "KOBE", "LISBON",
    "MADRID", "NAGOYA", "OSAKA", "PALERMO", "QINGDAO", "ROTTERDAM", "SANTOS", "TOKYO", "UTRECHT",
    "VALENCIA", "WELLINGTON", "XIAMEN", "YOKOHAMA", "ZURICH", "ALBATROSS", "BEACON", "CORAL", "DOLPHIN",
    "EAGLE", "FALCON", "GANNET", "HERON", "IBIS", "JADE", "KINGFISHER", "LOTUS", "MARLIN", "NAUTILUS",
    "OSPREY", "PELICAN", "RAVEN", "SEAHAWK", "TITAN", "URSA", "VEGA", "WHALE", "ARIES", "BOREALIS",
    "CASSIOPEIA", "DRACO", "ELECTRA", "FORNAX", "GEMINI", "HYDRA", "IRIS", "JUNO", "LYRA", "MIRA",
    "NOVA", "OPAL", "PERSEUS", "RIGEL", "SIRIUS", "TAURUS", "VIRGO", "ATLAS", "BALTIC", "CASPIAN",
)

COMPANY_FIRST: tuple[str, ...] = (
    "Acme", "Globex", "Pinnacle", "Harbor", "Summit", "Bluewater", "Redwood", "Northstar", "Keystone",
    "Cascade", "Evergreen", "Ironbridge", "Lakeside", "Meridian", "Oakridge", "Prairie", "Riverbend",
    "Silverline", "Timberland", "Westport", "Sunrise", "Granite", "Coastal", "Heritage", "Liberty",
)
COMPANY_SECOND: tuple[str, ...] = (
    "Imports", "Trading", "Home Goods", "Apparel", "Furniture", "Foods", "Electronics", "Outdoor",
    "Supply", "Brands", "Distribution", "Hardware", "Beverages", "Auto Parts", "Textiles",
)
COMPANY_SUFFIX: tuple[str, ...] = ("LLC", "Inc.", "Co.", "Corp.", "Ltd.", "Group", "")

SHIPMENT_TAGS: tuple[str, ...] = ("priority", "hot", "seasonal", "promo", "reefer", "hazmat", "retail", "ecommerce")
