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


class TestIdsTheirIssuersDefine:
    """Ids python-stdnum does not check (or checks by a rule since dropped): their own
    check characters, embedded dates and allocated ranges prove them."""

    @pytest.mark.parametrize(
        ("text", "value"),
        [
            ("T0412345F", "T0412345F"),  # Singapore NRIC: its check letter
            ("M1234567K", "M1234567K"),  # a 2022 M-series FIN: its own check letters
            ("CE 48 19 27 A", "CE 48 19 27 A"),  # UK NINO as printed on the card
            ("ce481927a", "ce481927a"),
            ("WALKE752203JA9BC", "WALKE752203JA9BC"),  # UK driving licence, a woman's month
            ("12030485M012", "12030485M012"),  # German pension insurance number
            ("912-58-4410", "912-58-4410"),  # an ITIN of a middle group the IRS added
            ("2345678T", "2345678T"),  # a DNI written without its leading zero
            ("3517 28402 1", "3517 28402 1"),  # an Australian Medicare card number
            ("17-21-654321-09", "17-21-654321-09"),  # a Korean driver's licence
        ],
    )
    def test_a_format_of_its_own_with_its_check_is_enough(self, text: str, value: str) -> None:
        assert _gone(text, value)

    @pytest.mark.parametrize(
        "text",
        [
            "T0412345G",  # the wrong check letter
            "DA 12 34 56 A",  # a NINO prefix HMRC never allocates
            "CE 48 19 27 E",  # nor a suffix past D
            "WALKE713203JA9BC",  # month 13
            "12030485M013",  # the wrong check digit
            "3517284021",  # a bare digit run: a Medicare number only when named
            "99-21-654321-09",  # no licence region 99
        ],
    )
    def test_the_same_shapes_failing_their_checks_stay(self, text: str) -> None:
        assert redact(text).text == text

    def test_a_korean_registration_number_needs_its_date_not_a_check_digit(self) -> None:
        # Numbers issued since October 2020 end in random digits.
        rng = random.Random(5)
        for sex in "12345678":
            tail = "".join(rng.choice("0123456789") for _ in range(6))
            number = f"850713-{sex}{tail}"
            assert _gone(f"등록번호 {number}", number)
        assert redact("851307-1234567").text == "851307-1234567"  # month 13
        assert redact("850713-9234567").text == "850713-9234567"  # no 19th-century sign

    @pytest.mark.parametrize(
        ("named", "bare"),
        [
            ("eGK-Nummer K702153866", "K702153866"),  # one check digit behind one letter
            ("medicare 3517284021", "3517284021"),
            ("TIN 204-817-365-000", "204-817-365-000"),  # Philippine TIN, mod 11
            ("Steuer-ID 24680135792", "24680135792"),  # the check digit of a German tax id
        ],
    )
    def test_a_weak_check_goes_only_when_named(self, named: str, bare: str) -> None:
        assert _gone(named, bare)
        assert redact(bare).text == bare


class TestWordsAroundTheNumber:
    def test_a_name_after_the_number_counts_when_a_copula_links_them(self) -> None:
        assert _gone("536904399 is my ssn", "536904399")
        assert _gone("ZX4417290 es mi número de pasaporte", "ZX4417290")
        assert _gone("ZX4417290 is my passport number", "ZX4417290")

    def test_a_name_after_the_number_without_a_copula_does_not(self) -> None:
        for text in ("we met in room 4417290 by the passport office", "536904399, then ssn"):
            assert redact(text).text == text

    def test_a_negated_name_names_nothing(self) -> None:
        for text in ("not a TIN 536904399", "this is not an ITIN: 912584410"):
            assert redact(text).text == text

    def test_a_name_judged_invalid_still_names_the_number(self) -> None:
        assert _gone("invalid TIN 536904399", "536904399")

    def test_a_document_noun_claims_every_number_it_lists(self) -> None:
        out = redact("passports: QK7712093 and RT5540981").text
        assert "QK7712093" not in out and "RT5540981" not in out


class TestADashedNumberIsOneNumber:
    def test_no_id_is_read_in_the_middle_of_a_dashed_number(self) -> None:
        # 536-90-4399 alone is an SSN in its own grouping; inside a longer part number it is not.
        assert redact("part 100-536-90-4399-200 is in stock").text == (
            "part 100-536-90-4399-200 is in stock"
        )
        assert _gone("ssn 536-90-4399", "536-90-4399")

    def test_dots_may_stand_for_the_national_formats_dashes_all_of_them(self) -> None:
        assert _gone("536.90.4399", "536.90.4399")
        assert redact("536-90.4399").text == "536-90.4399"

    def test_a_check_letter_after_a_dash_still_belongs_to_the_id(self) -> None:
        assert _gone("DNI 12345678-Z", "12345678-Z")


class TestMedicareBeneficiaryIds:
    @pytest.mark.parametrize("value", ["5KT3-WX8-RD21", "5KT3WX8RD21", "5kt3wx8rd21"])
    def test_the_cms_layout_is_enough_with_or_without_dashes(self, value: str) -> None:
        assert _gone(f"beneficiary {value} seen today", value)

    @pytest.mark.parametrize(
        "text",
        [
            "5ST3-WX8-RD21",  # S is never an MBI letter
            "0KT3-WX8-RD21",  # nor 0 its first digit
            "5KT3-WX8RD21",  # one dash without the other
            "5KT3-WX8-RD210",  # a twelfth character
        ],
    )
    def test_other_layouts_stay(self, text: str) -> None:
        assert redact(text).text == text


class TestNationalityNamesTheId:
    def test_a_countrys_id_named_by_its_nationality_goes(self) -> None:
        assert _gone("my Polish ID is 44051401458", "44051401458")
        assert _gone("RSA ID: 8501015800085", "8501015800085")

    def test_a_bare_id_word_does_not(self) -> None:
        assert redact("user ID 44051401458").text == "user ID 44051401458"


class TestLookAlikesThatAreNoPersonsId:
    def test_a_spanish_companys_nif_is_published_and_stays(self) -> None:
        from stdnum.es import cif

        number = "A5820147" + cif.calc_check_digits("A5820147")[0]
        assert cif.is_valid(number)
        assert redact(f"invoice from supplier {number}").text == (f"invoice from supplier {number}")

    @pytest.mark.parametrize("text", ["on 12 34 56 a", "my 12 34 56 b", "at 48 19 27 c"])
    def test_a_two_letter_word_before_spaced_digits_is_no_nino_prefix(self, text: str) -> None:
        assert redact(text).text == text

    @pytest.mark.parametrize("text", ["+43 536 904 399", "call +1 130 692 544 tonight"])
    def test_a_number_after_a_plus_is_a_phone_number(self, text: str) -> None:
        assert redact(text).text == text


class TestAFormatAPublicNumberShares:
    """An Australian TFN and a company's ACN are both written in three groups of three: the
    layout proves a TFN on sight only when the number fails the ACN's own check digit."""

    @staticmethod
    def _spaced(number: str) -> str:
        return f"{number[:3]} {number[3:6]} {number[6:]}"

    def _numbers(self, *, company: bool) -> list[str]:
        from stdnum.au import acn, tfn

        rng = random.Random(7)
        found: list[str] = []
        while len(found) < 20:
            n = "".join(rng.choice("0123456789") for _ in range(9))
            if tfn.is_valid(n) and acn.is_valid(n) == company:
                found.append(n)
        return found

    def test_a_number_that_is_also_a_valid_acn_stays_unless_named(self) -> None:
        for n in self._numbers(company=True):
            written = self._spaced(n)
            assert redact(f"registered to Wattle Pty Ltd, {written}").text.endswith(written)
            assert _gone(f"her TFN: {written}", written)

    def test_a_number_only_a_tfn_can_be_still_goes_on_sight(self) -> None:
        for n in self._numbers(company=False):
            written = self._spaced(n)
            assert _gone(f"registered to Wattle Pty Ltd, {written}", written)


def test_an_m_series_code_with_another_letter_is_no_fin() -> None:
    assert redact("use M1234567X at the gate").text == "use M1234567X at the gate"
