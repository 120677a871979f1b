"""Infer Tracking Number (auto-detect carrier): classify a number and predict its carrier from the
world's shipping lines. The contract gives the world no such call, so this heuristic lives here."""

from __future__ import annotations

import hashlib
import re

from ..world.identifiers import is_valid_container_number

CONTAINER_RE = re.compile(r"^[A-Z]{3}[UJZ]\d{7}$")
NUMBER_RE = re.compile(r"^[A-Z0-9]{6,30}$")


def _decision(conf: float) -> str:
    return "auto_select" if conf >= 0.95 else "needs_confirmation" if conf >= 0.70 else "no_prediction"


def infer(number: str, lines: list[dict]) -> dict | None:
    """The infer_number_results resource for `number`, or None when the format is invalid."""
    norm = re.sub(r"[\s-]", "", number).upper()
    if not NUMBER_RE.match(norm):
        return None
    by_prefix: dict[str, dict] = {}
    for line in lines:
        a = line.get("attributes", {})
        for code in [a.get("scac"), *(a.get("alternative_scacs") or []), a.get("bol_prefix")]:
            if code:
                by_prefix.setdefault(str(code).upper(), a)
    candidates: list[dict] = []
    if CONTAINER_RE.match(norm):
        number_type, vtype, check = "container", "container", is_valid_container_number(norm)
        owner = norm[:3]
        candidates = [{"scac": a["scac"], "name": a.get("name"), "confidence": 0.9}
                      for code, a in by_prefix.items() if code[:3] == owner][:3]
    else:
        vtype, check = "shipment", None
        hit = next((a for code, a in by_prefix.items() if norm.startswith(code)), None)
        number_type = "bill_of_lading" if hit else "booking"
        if hit:
            candidates = [{"scac": hit["scac"], "name": hit.get("name"), "confidence": 0.98}]
    selected = candidates[0] if candidates else None
    decision = _decision(selected["confidence"]) if selected else "no_prediction"
    rid = "req_" + hashlib.sha1(norm.encode()).hexdigest()[:20]
    return {"id": rid, "type": "infer_number_results", "attributes": {
        "number_type": number_type,
        "validation": {"is_valid": True if check is None else check, "type": vtype,
                       "check_digit_passed": check, "parsed_number": norm, "reason": None},
        "shipping_line": {"decision": decision, "selected": selected if decision == "auto_select" else None,
                          "candidates": candidates}}}
