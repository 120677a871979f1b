"""Identifier rules and deterministic id/number generation.

Check digits follow the real standards (ISO 6346 for containers, IMO for ship numbers) so that
generated numbers pass the same validation a client would apply to live data. Resource UUIDs are
*invertible*: the low 48 bits carry a keyed Feistel permutation of (kind, sub, index), the rest is a
keyed hash of it. An account can therefore decode one of its ids back to the generating index in
O(1) without any lookup table, which keeps 100k-shipment accounts lazy.
"""

from __future__ import annotations

import hashlib
import random
import string
import uuid

_ISO6346_VALUES: dict[str, int] = {}


def _build_iso6346_values() -> None:
    value = 10
    for letter in string.ascii_uppercase:
        if value % 11 == 0:
            value += 1
        _ISO6346_VALUES[letter] = value
        value += 1
    for digit in string.digits:
        _ISO6346_VALUES[digit] = int(digit)


_build_iso6346_values()
_POWERS = [2**i for i in range(10)]


def iso6346_check_digit(code: str) -> int:
    """Check digit of a container number (ISO 6346) from its first 10 characters.

    `code` is owner code (3 letters) + category letter + 6-digit serial, e.g. "CSQU305438" -> 3.
    A remainder of 10 maps to 0, as the standard's tables do.
    """
    code = code.upper()
    if len(code) != 10:
        raise ValueError("ISO 6346 check digit needs the 10 leading characters")
    values = _ISO6346_VALUES
    total = sum(map(int.__mul__, [values[ch] for ch in code], _POWERS))
    return total % 11 % 10


def is_valid_container_number(number: str) -> bool:
    """True when `number` is 4 letters + 7 digits with a correct ISO 6346 check digit."""
    number = number.upper()
    if len(number) != 11 or not number[:4].isalpha() or not number[4:].isdigit():
        return False
    return iso6346_check_digit(number[:10]) == int(number[10])


def norm_container(text: str) -> str:
    """Container-number form of a query: upper case without spaces and dashes."""
    return "".join(text.split()).replace("-", "").upper()


def container_number(owner: str, serial: int) -> str:
    """A full container number for a 4-letter owner code (e.g. "MSCU") and a 6-digit serial."""
    head = f"{owner.upper()}{serial % 1_000_000:06d}"
    return f"{head}{iso6346_check_digit(head)}"


def imo_check_digit(first_six: str) -> int:
    """IMO ship number check digit: sum of the six digits weighted 7..2, modulo 10."""
    if len(first_six) != 6 or not first_six.isdigit():
        raise ValueError("IMO check digit needs six digits")
    return sum(int(d) * w for d, w in zip(first_six, range(7, 1, -1), strict=True)) % 10


def is_valid_imo(imo: str) -> bool:
    """True when `imo` is 7 digits whose last digit is the IMO check digit of the first six."""
    return len(imo) == 7 and imo.isdigit() and imo_check_digit(imo[:6]) == int(imo[6])


def make_imo(rng: random.Random) -> str:
    """A plausible modern IMO number (9xxxxxx) with a valid check digit."""
    head = f"9{rng.randrange(10**5):05d}"
    return f"{head}{imo_check_digit(head)}"


def make_mmsi(rng: random.Random) -> str:
    """A 9-digit MMSI with a real maritime identification digit prefix (flag state)."""
    mid = rng.choice(["636", "563", "477", "538", "255", "229", "215", "566", "351", "370", "218", "240"])
    return f"{mid}{rng.randrange(0, 10**6):06d}"


def stable_int(*parts: object) -> int:
    """A 64-bit integer hash of `parts` that is stable across processes (unlike `hash()`)."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def rng_for(*parts: object) -> random.Random:
    """A private random stream for one generated object, so it can be regenerated on demand."""
    return random.Random(stable_int(*parts))


NAMESPACE = uuid.UUID("6f1c2b7e-49a1-4f7a-9d59-1f0c3c4e7a10")


def reference_uuid(kind: str, key: str) -> str:
    """Seed-independent id of a reference record (port, terminal, shipping line)."""
    return str(uuid.uuid5(NAMESPACE, f"{kind}:{key}"))


class IdCodec:
    """Encodes (kind, sub, index) into a random-looking UUID and decodes it back, keyed per account.

    Layout of the 48-bit payload: kind (4 bits) | sub (8 bits) | index (36 bits). The payload is run
    through a 4-round Feistel permutation keyed by the account key; the other UUID bits are a keyed
    hash of the permuted payload, so ids of another account (or forged ids) fail to decode.
    """

    KINDS = {"shipment": 1, "container": 2, "tracking_request": 3, "transport_event": 4,
             "party": 5, "document": 6, "vessel": 7}

    def __init__(self, key: str) -> None:
        self._key = key.encode()
        self._round_keys = [hashlib.blake2b(self._key + bytes([r]), digest_size=8).digest() for r in range(4)]

    def _f(self, r: int, half: int) -> int:
        h = hashlib.blake2b(half.to_bytes(3, "big"), key=self._round_keys[r], digest_size=3)
        return int.from_bytes(h.digest(), "big")

    def _permute(self, payload: int) -> int:
        left, right = payload >> 24, payload & 0xFFFFFF
        for r in range(4):
            left, right = right, left ^ self._f(r, right)
        return (left << 24) | right

    def _unpermute(self, value: int) -> int:
        left, right = value >> 24, value & 0xFFFFFF
        for r in reversed(range(4)):
            left, right = right ^ self._f(r, left), left
        return (left << 24) | right

    def _high(self, node: int) -> int:
        h = hashlib.blake2b(node.to_bytes(6, "big"), key=self._key[:64], digest_size=10).digest()
        return int.from_bytes(h, "big")

    def encode(self, kind: str, index: int, sub: int = 0) -> str:
        """The UUID string of object `index` (with sub-slot `sub`) of the given kind."""
        payload = (self.KINDS[kind] << 44) | ((sub & 0xFF) << 36) | (index & 0xFFFFFFFFF)
        node = self._permute(payload)
        value = (self._high(node) << 48) | node
        return str(uuid.UUID(int=value, version=4))

    def decode(self, id_: str) -> tuple[str, int, int] | None:
        """(kind, index, sub) of an id made by `encode`, or None for foreign or malformed ids."""
        try:
            u = uuid.UUID(str(id_))
        except (ValueError, AttributeError, TypeError):
            return None
        node = u.int & 0xFFFFFFFFFFFF
        payload = self._unpermute(node)
        kind_code, sub, index = payload >> 44, (payload >> 36) & 0xFF, payload & 0xFFFFFFFFF
        kind = next((k for k, v in self.KINDS.items() if v == kind_code), None)
        if kind is None or self.encode(kind, index, sub) != str(u):
            return None
        return kind, index, sub
