"""National, tax and health ids are redacted by their checksums; words around a bare digit
run decide whether it is one (an order number that happens to pass stays)."""

from __future__ import annotations

import random

import pytest
from stdnum import luhn

from sleepmem.core.redaction import redact


def _gone(text: str, value: str) -> bool:
    return value not in redact(text).text


class TestAnIdProvedOnSight:
    @pytest.mark.parametrize(
        ("text", "value"),
        [
            ("12345678Z", "12345678Z"),  # Spanish DNI: a check letter
            ("RSSMRA85T10A562S", "RSSMRA85T10A562S"),  # codice fiscale
            ("his hetu is 131052-308T", "131052-308T"),  # the century sign is part of it
            ("536-90-4399", "536-90-4399"),  # a US SSN in its own grouping
            ("130 692 544", "130 692 544"),  # a Canadian SIN, spaces for its dashes
            ("11010519491231002X", "11010519491231002X"),  # a Chinese resident id
        ],
    )
    def test_a_check_letter_or_the_national_format_is_enough(self, text: str, value: str) -> None:
        assert _gone(text, value)
        assert "[REDACTED:" in redact(text).text


class TestContextDecides:
    @pytest.mark.parametrize(
        ("text", "value"),
        [
            ("my ssn is 536904399", "536904399"),
            ("my pesel is 44051401458", "44051401458"),
            ("nhs number 943 476 5919", "943 476 5919"),
            ("身份证 360426198502123013", "360426198502123013"),
            ("Meine Steuer-ID: 36574261809.", "36574261809"),
        ],
    )
    def test_words_that_name_an_id_make_a_valid_digit_run_one(self, text: str, value: str) -> None:
        assert _gone(text, value)

    @pytest.mark.parametrize(
        "text",
        [
            "536904399",
            "44051401458",
            "order 536904399 shipped",
            "tracking 44051401458",
            "call me at 943 476 5919",
            "version 1.2.3.4567890",
            "see you at 12:30 on 2024-05-01, room 1234567",
            "256.256.256.256",
        ],
    )
    def test_a_bare_or_otherwise_named_digit_run_stays(self, text: str) -> None:
        assert redact(text).text == text

    def test_a_number_that_fails_every_checksum_stays_even_when_named(self) -> None:
        assert redact("my pesel is 44051401459").text == "my pesel is 44051401459"

    def test_order_ids_that_pass_luhn_by_chance_are_no_id_numbers(self) -> None:
        rng = random.Random(41)
        kinds: set[str] = set()
        for _ in range(500):
            body = "".join(rng.choice("0123456789") for _ in range(rng.randint(12, 18)))
            number = body + luhn.calc_check_digit(body)
            kinds.update(redact(f"your order {number} has shipped").kinds)
            kinds.update(k for k in redact(number).kinds if k != "card_number")
        assert kinds == set()


class TestADocumentNounClaimsItsNumber:
    @pytest.mark.parametrize(
        ("text", "value"),
        [
            ("My passport number is CD7654321 and it expires soon", "CD7654321"),
            ("대한민국 여권 S87654321", "S87654321"),
            ("Licence: MORGA607054SM9IJ ok", "MORGA607054SM9IJ"),
        ],
    )
    def test_the_number_in_the_nouns_clause_goes_without_a_checksum(
        self, text: str, value: str
    ) -> None:
        assert _gone(text, value)

    @pytest.mark.parametrize(
        "text",
        [
            "my passport expires 2030-05-01",
            "I lost my passport in Rome last summer, room 123456",
            "the license was renewed. Order 1234567 shipped",
            "order license 12345678",
        ],
    )
    def test_dates_and_numbers_of_other_clauses_stay(self, text: str) -> None:
        assert redact(text).text == text
