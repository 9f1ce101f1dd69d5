"""The GPT-2 byte-level alphabet: each byte shown as one printable character."""

from __future__ import annotations

from functools import cache


@cache
def byte_decoder() -> dict[str, int]:
    """Map each byte-level alphabet character back to the byte it stands for."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    shown = dict(zip(printable, printable, strict=True))
    extra = 0
    for byte in range(256):
        if byte not in shown:
            shown[byte] = 256 + extra
            extra += 1
    return {chr(code): byte for byte, code in shown.items()}


def token_bytes(token: str) -> bytes | None:
    """The raw bytes of a byte-level token string, or None if it is not one (e.g. a special token)."""
    table = byte_decoder()
    try:
        return bytes(table[character] for character in token)
    except KeyError:
        return None
