"""Secret redaction: what must go, in many wordings (EN and ZH), and what must stay."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleepmem.core import redaction
from sleepmem.core.redaction import redact, redact_json

# (text, the secret that must disappear, the kind reported)
SECRETS: list[tuple[str, str, str]] = [
    # API keys and tokens with a known shape
    (
        "my OpenAI key is sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c",
        "sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c",
        "api_key",
    ),
    ("use sk-Zx81kPq02LmNa7TyRe55Wq for the old project", "sk-Zx81kPq02LmNa7TyRe55Wq", "api_key"),
    (
        "anthropic: sk-ant-api03-AbC123dEf456GhI789jKl",
        "sk-ant-api03-AbC123dEf456GhI789jKl",
        "api_key",
    ),
    ("aws id AKIAZ7Q4M2N8P6R3T5V1 in us-east-1", "AKIAZ7Q4M2N8P6R3T5V1", "api_key"),
    (
        "push with ghp_9aZbY8cX7dW6eV5fU4gT3hS2iR1jQ0kPlMn",
        "ghp_9aZbY8cX7dW6eV5fU4gT3hS2iR1jQ0kPlMn",
        "api_key",
    ),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "api_key",
    ),
    ("slack bot xoxb-2048-1234567890-AbCdEfGhIjKl", "xoxb-2048-1234567890-AbCdEfGhIjKl", "api_key"),
    (
        "maps key AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
        "api_key",
    ),
    ("stripe sk_live_51HqLm2eZvKYlo2C8aBcDeFgH", "sk_live_51HqLm2eZvKYlo2C8aBcDeFgH", "api_key"),
    # generic labelled keys
    ("api_key=9f8e7d6c5b4a3921", "9f8e7d6c5b4a3921", "api_key"),
    ("My API key is Zt81-q0Pl-77xK", "Zt81-q0Pl-77xK", "api_key"),
    ("the access token: a1b2c3d4e5f6g7h8", "a1b2c3d4e5f6g7h8", "api_key"),
    ('config {"client_secret": "s3cr3t-V4lue-99"}', "s3cr3t-V4lue-99", "api_key"),
    (
        "aws secret access key wJalrXUtnFEMIK7MDENGbPxRfiCY9EXAMPLEKEY",
        "wJalrXUtnFEMIK7MDENGbPxRfiCY9EXAMPLEKEY",
        "api_key",
    ),
    ("我的API密钥是 k9Xq2Lm7Np4R", "k9Xq2Lm7Np4R", "api_key"),
    ("令牌：tok_88a7f6e5d4c3", "tok_88a7f6e5d4c3", "api_key"),
    # bearer tokens and JWTs
    (
        "curl -H 'Authorization: Bearer 7f3a9c1e5b2d8f4a6c0e'",
        "7f3a9c1e5b2d8f4a6c0e",
        "bearer_token",
    ),
    (
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9",
        "jwt",
    ),
    # passwords, with punctuation inside the value
    ("my password is hunter2-Prod!", "hunter2-Prod!", "password"),
    ("Password: Tr0ub4dor&3", "Tr0ub4dor&3", "password"),
    ("the wifi password for the office is CoffeeBeans#42", "CoffeeBeans#42", "password"),
    ("pwd=p@ss_w0rd.2024", "p@ss_w0rd.2024", "password"),
    ("passwd is now Zebra!Crossing9", "Zebra!Crossing9", "password"),
    ("我的密码是Abc!2345，别告诉别人", "Abc!2345", "password"),
    ("邮箱密码：qwerty_789", "qwerty_789", "password"),
    ("口令为 S3same-Open", "S3same-Open", "password"),
    # card numbers (Luhn-valid), with spaces, dashes or none
    ("card 4111 1111 1111 1111 exp 12/27", "4111 1111 1111 1111", "card_number"),
    ("charge 5500-0000-0000-0004 please", "5500-0000-0000-0004", "card_number"),
    ("amex 378282246310005", "378282246310005", "card_number"),
    ("我的信用卡号是6011111111111117，谢谢", "6011111111111117", "card_number"),
    # one-time codes
    ("your verification code is 482913", "482913", "one_time_code"),
    ("OTP: 7731", "7731", "one_time_code"),
    ("Use one-time passcode 55193024 to sign in", "55193024", "one_time_code"),
    ("the code is 902114", "902114", "one_time_code"),
    ("my PIN is 4821", "4821", "one_time_code"),
    ("2FA code 660215 expires soon", "660215", "one_time_code"),
    ("884213 is your login code", "884213", "one_time_code"),
    ("验证码：884213", "884213", "one_time_code"),
    ("您的验证码为 552901，5分钟内有效", "552901", "one_time_code"),
    ("123456是您的验证码", "123456", "one_time_code"),
    ("验证码：５５２９０１", "５５２９０１", "one_time_code"),  # full-width digits
    # private keys and connection strings
    (
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7x",
        "private_key",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt (truncated",
        "b3BlbnNzaC1rZXkt",
        "private_key",
    ),
    ("db at postgres://admin:pa55w0rd@db.internal:5432/app", "pa55w0rd", "password"),
    ("REDIS_URL=redis://:S3cretR3dis@cache:6379/0", "S3cretR3dis", "password"),
]

HARMLESS = [
    "I use OpenAI for my side project",
    "my order number is 88231",
    "the service listens on port 3990",
    "we moved to Berlin in 2023 and again in 2024",
    "it cost $1999 last year, now 2499 EUR",
    "the key point is that pricing changed",
    "the token limit is 4096 per request",
    "the password is wrong, please reset it",
    "I use a password manager at work",
    "passwords are hashed with argon2",
    "the secret ingredient is love",
    "zip code 94107",
    "error code 5003 from the payment API",
    "code review on 2024-05-01 at 14:30",
    "call me at 415 555 0132",
    "the meeting is at 10:30, room 4021",
    "我住在上海，订单号是88231",
    "这次先这样，下周再说",
    "keyboard shortcuts: ctrl+k then 2",
    "version 3.11.7 released 2023-12-04",
]


class TestSecretsAreReplaced:
    @pytest.mark.parametrize(("text", "secret", "kind"), SECRETS)
    def test_the_secret_is_gone_and_its_kind_reported(
        self, text: str, secret: str, kind: str
    ) -> None:
        result = redact(text)
        assert secret not in result.text
        assert f"[REDACTED:{kind}]" in result.text
        assert kind in result.kinds

    def test_the_words_around_a_secret_stay_readable(self) -> None:
        result = redact("my password is hunter2-Prod! and I like tea")
        assert result.text == "my password is [REDACTED:password] and I like tea"

    def test_only_the_password_of_a_connection_string_goes(self) -> None:
        result = redact("postgres://admin:pa55w0rd@db:5432/app")
        assert result.text == "postgres://admin:[REDACTED:password]@db:5432/app"

    def test_chinese_values_stop_at_chinese_punctuation(self) -> None:
        assert redact("密码是Abc!2345，记住").text == "密码是[REDACTED:password]，记住"

    def test_several_secrets_in_one_text_are_all_counted(self) -> None:
        text = "key sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c, password: hunter2!, OTP 7731"
        result = redact(text)
        assert sorted(result.kinds) == ["api_key", "one_time_code", "password"]

    def test_a_card_number_failing_luhn_is_left_alone(self) -> None:
        assert redact("ref 4111 1111 1111 1112").text == "ref 4111 1111 1111 1112"

    @pytest.mark.parametrize(
        "text",
        ["the card no. on file: 5500 0000 0000 0005", "charged to amex card 378282246310006",
         "visa card number 4111-1111-1111-1112", "diners card # 30569309025905"],
    )  # fmt: skip
    def test_a_named_card_number_a_luhn_network_never_issued_stays(self, text: str) -> None:
        # Visa, Mastercard, Amex and Diners number every card so that it passes Luhn: in
        # their range and length, a failing number is a typo or made up, no card.
        assert redact(text).text == text

    @pytest.mark.parametrize(
        ("text", "value"),
        [("银行卡 6212 3456 7890 1234", "6212 3456 7890 1234"),  # UnionPay: Luhn optional
         ("card number 9876 5432 1098 7654", "9876 5432 1098 7654")],  # no network's range
    )  # fmt: skip
    def test_a_named_card_number_outside_luhn_networks_goes_checksum_or_not(
        self, text: str, value: str
    ) -> None:
        assert value not in redact(text).text

    def test_a_number_after_a_card_is_not_swallowed(self) -> None:
        assert redact("4111111111111111 2024").text == "[REDACTED:card_number] 2024"

    def test_uppercase_labels_are_caught(self) -> None:
        assert "Tr0ub" not in redact("PASSWORD: Tr0ub4dor&3").text

    def test_redacting_twice_changes_nothing_more(self) -> None:
        once = redact("password: hunter2! card 4111111111111111 code 482913").text
        assert redact(once).text == once
        assert redact(once).kinds == ()


class TestHarmlessTextIsKept:
    @pytest.mark.parametrize("text", HARMLESS)
    def test_the_text_comes_back_unchanged(self, text: str) -> None:
        result = redact(text)
        assert result.text == text
        assert result.kinds == ()
        assert not result.changed

    def test_empty_text_is_fine(self) -> None:
        assert redact("").text == ""


class TestJsonValues:
    def test_strings_anywhere_in_the_structure_are_redacted(self) -> None:
        meta = {"note": "password: hunter2!", "items": [{"card": "4111 1111 1111 1111"}]}
        out = redact_json(meta)
        assert out["note"] == "password: [REDACTED:password]"
        assert out["items"][0]["card"] == "[REDACTED:card_number]"

    @pytest.mark.parametrize(
        "key", ["password", "api_key", "apiKey", "access_token", "client-secret", "pin", "密码"]
    )
    def test_a_value_under_a_secret_named_key_goes_whole(self, key: str) -> None:
        assert redact_json({key: "plain"}) == {key: "[REDACTED:secret]"}

    def test_numbers_under_secret_named_keys_go_too(self) -> None:
        assert redact_json({"otp": 482913}) == {"otp": "[REDACTED:secret]"}

    def test_ordinary_keys_and_values_are_kept(self) -> None:
        meta = {"tokens": 512, "token_count": 3, "channel": "chat", "ok": True, "n": None}
        assert redact_json(meta) == meta

    def test_the_input_is_not_modified(self) -> None:
        meta = {"password": "x"}
        redact_json(meta)
        assert meta == {"password": "x"}


class _EveryTextTrips:
    """Stands in for the trigger scan: as if every text held a trigger word."""

    def find_matches_as_indexes(self, _text: str) -> list[tuple[int, int, int]]:
        return [(0, 0, 0)]


_FRAGMENTS = (
    [text for text, _secret, _kind in SECRETS]
    + HARMLESS
    + [
        "Passcode",
        "pin 4821",
        "SG.",
        "AKIA",
        "eyJ",
        "://",
        " ",
        "。",
        "İ",
        "1234 5678 9012 3456",
    ]
)


class TestTheTriggerScanOnlySkipsWork:
    """The one-pass scan for trigger words may skip the rules, never change their outcome."""

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=4), st.text(max_size=20))
    def test_redaction_is_the_same_with_and_without_it(self, parts: list[str], noise: str) -> None:
        text = noise.join(parts)
        scanned = redact(text)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(redaction, "_TRIGGERS", _EveryTextTrips())
            unscanned = redact(text)
        assert scanned == unscanned


class TestMarkersThatAreNotOurs:
    """Only a marker as redaction writes it is kept as it is; anything like one is text."""

    @pytest.mark.parametrize("marker", ["[redacted:x]", "[Redacted:API]", "[REDACTED:Key]"])
    def test_a_look_alike_marker_is_scanned_as_text(self, marker: str) -> None:
        # Each once recursed until the stack ran out: no marker was found to split on.
        result = redact(f"note {marker} then pw hunter2!")
        assert result.text == f"note {marker} then pw [REDACTED:password]"
        assert result.kinds == ("password",)

    def test_a_real_marker_next_to_a_look_alike_still_splits_the_text(self) -> None:
        text = "[REDACTED:password] and [redacted:x], key: sk-proj-Q3vX9mT2LpA8wZr5Kd7YbN1c"
        result = redact(text)
        assert result.text == "[REDACTED:password] and [redacted:x], key: [REDACTED:api_key]"


class TestRedactText:
    """``redact_text`` is ``redact(...).text`` without the result, for the hot path."""

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=4), st.text(max_size=20))
    def test_it_gives_the_text_redact_gives(self, parts: list[str], noise: str) -> None:
        text = noise.join(parts)
        assert redaction.redact_text(text) == redact(text).text

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(_FRAGMENTS), max_size=3).map(" ".join), max_size=6))
    def test_many_texts_at_once_give_what_each_alone_gives(self, texts: list[str]) -> None:
        # One trigger scan over the texts joined by line breaks, mapped back to each text.
        assert redaction.redact_texts(texts) == [redact(t).text for t in texts]

    def test_no_trigger_word_can_match_across_two_joined_texts(self) -> None:
        texts = ["my pass", "word is x1y2z3"]  # "my password is x1y2z3" if run together
        assert redaction.redact_texts(texts) == texts

    def test_a_text_without_secrets_comes_back_as_the_same_object(self) -> None:
        text = "book a table for two at 7pm, order 88231"
        assert redaction.redact_text(text) is text


class TestIdsAreNotSecrets:
    """Generated ids are hex runs with digits in them; none may read as a one-time code (a
    refused id would make an event with a made-up id fail at random)."""

    def test_no_generated_event_id_looks_like_a_secret(self) -> None:
        import uuid

        from sleepmem.core.redaction import contains_secret
        from sleepmem.ingest.validation import next_event_id

        ids = [uuid.uuid4().hex for _ in range(20_000)] + [next_event_id() for _ in range(5_000)]
        assert [i for i in ids if contains_secret(i)] == []

    def test_a_forked_process_draws_ids_of_its_own(self) -> None:
        import os

        from sleepmem.ingest.validation import next_event_id

        next_event_id()  # the parent has drawn ids before it forks
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report its next id and leave at once
            try:
                os.write(write, next_event_id().encode())
            finally:
                os._exit(0)
        os.close(write)
        child = os.read(read, 64).decode()
        os.close(read)
        os.waitpid(pid, 0)
        parent = next_event_id()
        assert len(child) == len(parent) == 32
        assert child[:16] != parent[:16]  # a prefix of its own, so no id can repeat

    def test_the_hex_id_that_once_read_as_a_code_is_left_alone(self) -> None:
        from sleepmem.core.redaction import redact

        for seen in ("5da01692fa55422fa6aa32ccc2143541", "88d9b8a1f7b947359506e412fa963234"):
            assert redact(seen).text == seen

    def test_codes_standing_alone_are_still_codes(self) -> None:
        from sleepmem.core.redaction import redact

        for text in ("my pin1234", "2FA code 839201", "验证码123456", "the code is 483920"):
            assert "[REDACTED:one_time_code]" in redact(text).text


class TestCredentialIntent:
    """A value said to be a password, PIN, token, key or seed goes, whatever the wording."""

    @pytest.mark.parametrize(
        ("text", "secret"),
        [
            ("my netflix pw is hunter22", "hunter22"),
            ("the pin for the door is 4471", "4471"),
            ("passwords: bluejay42", "bluejay42"),
            ("密码是我生日 19900307", "19900307"),
            ("wifi password? sure: bluejay42", "bluejay42"),
            ("My password is on the note. It is Tr0ub4dor", "Tr0ub4dor"),
            ("the pass: sunshine", "sunshine"),
            ("the token for ci is abcd1234efgh5678", "abcd1234efgh5678"),
            ("Password for the NAS, in case you need it, lamp-77-green", "lamp-77-green"),
            ("门禁的密码：换成了 880512 了", "880512"),
        ],
    )
    def test_the_value_a_credential_noun_claims_goes(self, text: str, secret: str) -> None:
        assert secret not in redact(text).text

    @pytest.mark.parametrize(
        "text",
        [
            "passwords are hashed with argon2",
            "I will pass on the 2023 trip",
            "The key to success is 10000 hours of practice",
            "I forgot my password again, so I called them at 9:30",
            "a token of thanks from the 3 of us",
            "Keys, passwords, card numbers and one-time codes never reach disk",
        ],
    )
    def test_talk_about_credentials_is_kept(self, text: str) -> None:
        assert redact(text).text == text

    def test_a_seed_phrase_goes_whole(self) -> None:
        words = "abandon ability able about above absent absorb abstract absurd abuse access acid"
        out = redact(f"my seed phrase is {words}").text
        assert "absorb" not in out and "abandon" not in out


class TestSecretNamesInAnyCaseStyle:
    @pytest.mark.parametrize(
        "key",
        ["dbPassword", "db_password", "db-password", "db.password", "DB_PASSWORD", "clientSecret",
         "X-Api-Key", "sessionToken", "signing.key", "数据库密码"],
    )  # fmt: skip
    def test_a_scalar_under_a_secret_name_goes(self, key: str) -> None:
        assert redact_json({key: "x1"}) == {key: "[REDACTED:secret]"}

    @pytest.mark.parametrize(
        "key", ["passwordPolicy", "tokens", "token_count", "primaryKey", "userName", "monkey"]
    )
    def test_names_about_secrets_are_kept(self, key: str) -> None:
        assert redact_json({key: 12}) == {key: 12}

    @pytest.mark.parametrize(
        "text",
        ['clientSecret := "s3cr3t-value"', "export DB_PASSWORD=s3cr3t-value",
         "--api-key=s3cr3t-value", "deploy --password s3cr3t-value now",
         "-ClientSecret 's3cr3t-value'",
         "curl --user kevin:'s3cr3t-value' https://example.org"],
    )  # fmt: skip
    def test_assignments_and_flags_give_their_value_away(self, text: str) -> None:
        assert "s3cr3t-value" not in redact(text).text

    def test_an_argv_list_loses_the_value_after_a_secret_flag(self) -> None:
        argv = ["deploy", "--password", "hunter2", "--token=abc123", "--verbose", "on"]
        out = redact_json(argv)
        assert "hunter2" not in out and "abc123" not in str(out)
        assert out[-2:] == ["--verbose", "on"]


class TestCardNumbersNeedContext:
    """One random digit run in ten passes Luhn: context decides, not the digit count."""

    def test_order_ids_that_pass_luhn_are_kept(self) -> None:
        import random

        rng = random.Random(41)
        ids = [
            "".join(rng.choice("0123456789") for _ in range(rng.randint(13, 19)))
            for _ in range(1000)
        ]
        for template in ("order id {}", "tracking no. {}", "订单号 {}"):
            assert [i for i in ids if redact(template.format(i)).kinds] == []

    @pytest.mark.parametrize(
        "text",
        ["my card 4111 1111 1111 1111 exp 12/27", "I paid with 4111111111111111",
         "visa 5555555555554444 for the order", "信用卡 6222021234567890128"],
    )  # fmt: skip
    def test_card_numbers_in_card_context_or_network_shape_go(self, text: str) -> None:
        assert "[REDACTED:card_number]" in redact(text).text


class TestATurnOfSeveralMessages:
    """A credential asked for in one message claims the value sent in the next."""

    @pytest.mark.parametrize(
        ("messages", "secret"),
        [
            (["what is the wifi password?", "bluejay42, all lower case"], "bluejay42"),
            (["the pin for the door", "it is 4471"], "4471"),
            (["密码是什么？", "我生日 19900307"], "19900307"),
        ],
    )
    def test_the_next_message_loses_the_value(self, messages: list[str], secret: str) -> None:
        assert secret not in " ".join(redaction.redact_turn(messages))

    def test_a_value_given_in_its_own_message_claims_nothing_further(self) -> None:
        out = redaction.redact_turn(["my password is hunter22", "the table seats 1234 people"])
        assert out == ["my password is [REDACTED:password]", "the table seats 1234 people"]

    def test_messages_without_a_credential_noun_are_kept(self) -> None:
        messages = ["the key to success?", "practice 10000 hours"]
        assert redaction.redact_turn(messages) == messages


class TestStandInsAreNotSecrets:
    """A reference, a template, a mask or a slot's name says where a secret is or what it
    looks like; it holds nothing to leak, whichever detector found it."""

    @pytest.mark.parametrize(
        "text",
        ['export DB_PASSWORD="${DB_PASSWORD}"', "curl -u deploy:$DEPLOY_PASSWORD https://ci",
         'password: "{{ .Values.db.password }}"', "token = secrets.GITHUB_TOKEN",
         'api_key = os.environ["OPENAI_API_KEY"]', "SUMO_ACCESS_KEY={SumoAccessKey}",
         'client_secret = "<your-client-secret>"', "Authorization: Bearer $API_KEY",
         "set password=%DB_PASSWORD% first", "password: ${{ secrets.DB_PASSWORD }}"],
    )  # fmt: skip
    def test_a_reference_or_a_template_is_kept(self, text: str) -> None:
        assert redact(text).text == text

    @pytest.mark.parametrize(
        "text",
        ["ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "key = AKIAXXXXXXXXXXXXXXXX",
         "Authorization: Token **********", "curl --user xxx:yyy", "password: ********"],
    )  # fmt: skip
    def test_a_mask_or_filler_is_kept(self, text: str) -> None:
        assert redact(text).text == text

    @pytest.mark.parametrize(
        "text",
        ["curl -u username:password https://ci", "DB_PASSWORD=your_password"],
    )  # fmt: skip
    def test_a_slot_named_by_what_fills_it_is_kept(self, text: str) -> None:
        assert redact(text).text == text

    @pytest.mark.parametrize(
        ("text", "sample"),
        [("aws_access_key: AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
         ("my key is AKIAIOSFODNN7EXAMPLE, keep it safe", "AKIAIOSFODNN7EXAMPLE"),
         ("我的 GitHub token 是 ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", "ghp_1234567890"),
         ("token: ntn_123456789012345678901234567890", "ntn_1234567890")],
    )  # fmt: skip
    def test_a_documented_sample_or_a_counting_run_is_redacted_like_a_live_key(
        self, text: str, sample: str
    ) -> None:
        assert sample not in redact(text).text

    @pytest.mark.parametrize(
        "text", ["GITHUB_API_KEY=\nDYNATRACE_API_KEY=", "snowflake.password=\njdbc.url="]
    )
    def test_an_empty_value_does_not_take_the_next_line_s_key(self, text: str) -> None:
        assert redact(text).text == text

    @pytest.mark.parametrize(
        ("text", "secret"),
        [("my password is changeme", "changeme"), ("curl -u admin:test1 https://ci", "test1"),
         ("the wifi password: 12345678", "12345678"), ("pin 0000 for the gate", "0000"),
         ("export DB_PASSWORD=MyPassword1", "MyPassword1"),
         ("twitter_api_token = AAAAAAAAAAAAAAAAAAAAAMLheAAAAAAAA0npEbHyYkL3jKm9Qx7rT2w", "MLhe")],
    )  # fmt: skip
    def test_a_weak_literal_is_still_a_value(self, text: str, secret: str) -> None:
        assert secret not in redact(text).text

    def test_a_reference_under_a_secret_name_in_json_is_kept(self) -> None:
        meta = {"password": "${DB_PASSWORD}", "token": "s3cr3t-value"}
        assert redact_json(meta) == {"password": "${DB_PASSWORD}", "token": "[REDACTED:secret]"}


class TestTheWholeNameAroundALabelDecides:
    """A label word inside a longer name is read with the name ("bucket_key" is no
    credential), and a dotted name of words is a name, however long."""

    @pytest.mark.parametrize(
        "text",
        ['"bucket_key": "SalesResults-1.2"', "schemaKey = 'DOC_Vector_5_32'",
         '"kms_key_id": "555ea4a3-d53a-4412-9c66-3a7cb667b0d6"', "monkey: banana42x",
         'notes = "Maven - io.jsonwebtoken:jjwt-jackson-0.11.2"',
         "X-MS-Exchange-Organization-AuthSource: sm02915.int.contoso.com",
         "\tdoc.Security.KeySize = PdfEncryptionKeySize.Key128Bit;",
         "BlindKeySignatures = Ed25519.BlindKeySignatures", "IceSSL.KeyFile=s_rsa1024_priv.pem",
         "MantleAPI_version=9a038989604e8da62ecddbe2094b16ce1b778be1"],
    )  # fmt: skip
    def test_a_name_that_is_no_credential_keeps_its_value(self, text: str) -> None:
        assert redact(text).text == text

    @pytest.mark.parametrize(
        "text",
        ['"db_api_key": "s3cr3t-value9"', "sessionToken = s3cr3t-value9",
         "the key: s3cr3t-value9", "CI_DEPLOY_TOKEN=Q7vX2mT9LpA8wZr5Kd3YbN1cHf6J"],
    )  # fmt: skip
    def test_a_name_that_says_credential_still_gives_its_value_away(self, text: str) -> None:
        out = redact(text).text
        assert "s3cr3t-value9" not in out and "Q7vX2mT9LpA8wZr5" not in out


class TestShapesNeedTheirSubstance:
    @pytest.mark.parametrize(
        "text",
        [
            "-----BEGIN PRIVATE KEY-----\nanything\n-----END PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY----------END OPENSSH PRIVATE KEY-----",
        ],
    )
    def test_a_private_key_block_around_no_key_is_kept(self, text: str) -> None:
        assert redact(text).text == text

    def test_a_cut_off_private_key_still_goes(self) -> None:
        assert (
            "MIIEpAIBAAKCAQEA"
            not in redact("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA").text
        )

    def test_a_provider_prefix_inside_a_word_is_no_token(self) -> None:
        assert redact("TODAYINASIAASACKOFRICEFELLOVER").text == "TODAYINASIAASACKOFRICEFELLOVER"

    def test_a_complete_public_block_is_published_not_secret(self) -> None:
        body = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLez"
        certificate = f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----"
        assert redact(certificate).text == certificate
        key = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
        assert redact(f"{certificate}\n{key}").text == f"{certificate}\n[REDACTED:private_key]"
