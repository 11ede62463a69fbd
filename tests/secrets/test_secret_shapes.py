"""Secrets and public strings told apart by what they are: a card network's issuer range,
an IBAN's head, a Bitcoin address's checksum, a provider's key prefix."""

from __future__ import annotations

import hashlib
import random

from stdnum import iban, luhn

from sleepmem.core.redaction import redact

_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _card(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    return body + luhn.calc_check_digit(body)


def _base58check(payload: bytes) -> str:
    raw = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    n, out = int.from_bytes(raw, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = _BASE58[r] + out
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + out


class TestCardNetworks:
    def test_cards_of_the_smaller_networks_are_cards(self) -> None:
        rng = random.Random(3)
        for prefix, length in (("1", 15), ("5019", 16), ("6759", 16), ("2201", 16), ("57", 18)):
            number = _card(prefix, length, rng)
            assert number not in redact(f"paid with {number}").text, (prefix, number)

    def test_the_digits_after_an_ibans_head_are_no_card(self) -> None:
        rng = random.Random(4)
        for _ in range(20):
            card = _card("4", 16, rng)
            grouped = " ".join(card[i : i + 4] for i in range(0, 16, 4))
            assert "card_number" not in redact(f"GB71 {grouped} 12").kinds


class TestBitcoinAddresses:
    def test_an_address_that_passes_its_checksum_is_kept(self) -> None:
        rng = random.Random(6)
        for version in (b"\x00", b"\x05"):  # pay-to-key-hash "1…", pay-to-script "3…"
            address = _base58check(version + rng.randbytes(20))
            text = f"send it to {address} please"
            assert redact(text).text == text

    def test_the_same_shape_failing_the_checksum_is_still_a_secret(self) -> None:
        rng = random.Random(6)
        address = _base58check(b"\x00" + rng.randbytes(20))
        broken = address[:-3] + ("A" if address[-3] != "A" else "B") + address[-2:]
        assert broken not in redact(f"send it to {broken} please").text

    def test_a_taproot_address_that_passes_its_bech32m_checksum_is_kept(self) -> None:
        address = _taproot(random.Random(9).randbytes(32))
        assert redact(f"send it to {address} please").text == f"send it to {address} please"
        broken = address[:-1] + ("q" if address[-1] != "q" else "p")
        assert broken not in redact(f"send it to {broken} please").text


_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _polymod(values: list[int]) -> int:
    chk = 1
    for value in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ value
        for i, g in enumerate(_BECH32_GENERATOR):
            chk ^= g if (top >> i) & 1 else 0
    return chk


def _taproot(program: bytes) -> str:
    """A witness version 1 address (BIP 350), encoded here from its definition."""
    bits = "".join(f"{b:08b}" for b in program)
    bits += "0" * (-len(bits) % 5)
    data = [1] + [int(bits[i : i + 5], 2) for i in range(0, len(bits), 5)]
    mod = _polymod([3, 3, 0, 2, 3, *data, 0, 0, 0, 0, 0, 0]) ^ 0x2BC830A3
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(6)]
    return "bc1" + "".join(_BECH32[d] for d in data + checksum)


class TestProviderPrefixes:
    def test_an_aws_bedrock_key_goes_by_its_prefix_random_or_not(self) -> None:
        # "ABSK" and base64 of "BedrockAPIKey-": the body need not look random (base64 of
        # "foobar" over and over). One spelled "EXAMPLE" is AWS's documentation sample.
        key = "ABSKQmVkcm9ja0FQSUtleS1" + ("Zm9vYmFy" * 14) + "="
        assert "Zm9vYmFy" not in redact(f"use {key} for bedrock").text


class TestIbans:
    def test_an_iban_of_a_bank_missing_from_stdnums_registry_is_still_an_iban(self) -> None:
        # Bank code 539 is not in stdnum's Belgian snapshot; structure and mod 97 hold.
        bban = "5394417209"
        bban += f"{int(bban) % 97 or 97:02d}"
        number = "BE" + iban.calc_check_digits("BE00" + bban) + bban
        assert not iban.is_valid(number)
        assert number not in redact(f"pay into {number}").text

    def test_an_iban_failing_mod_97_stays(self) -> None:
        text = "pay into BE54539441720953"  # the check digits above, off by one
        assert redact(text).text == text
