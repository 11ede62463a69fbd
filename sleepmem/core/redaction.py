"""Secret redaction: the write gate's first rule, applied before anything reaches disk or logs.

Secrets are replaced by ``[REDACTED:<kind>]``. Provider tokens come from the maintained
detectors of detect-secrets (AWS, GitHub, GitLab, Stripe, Twilio, Slack tokens and webhooks,
PyPI, Telegram, Azure storage, JWT, SendGrid, Mailchimp, Discord, Square, npm), numbers are
checked by python-stdnum (Luhn card numbers, IBAN), and secrets named in words ("password",
"pw", "pin", "cookie", "Authorization", 密码, 支付密码, 验证码, 卡号 ...) are caught by label
rules that accept any separator: none, ':', '：', 'is', '是', '为' or a space. In a secret
context the rules redact when in doubt, multi-word passphrases included.

Every detector reports spans over the same text; overlapping spans merge into one marker, so
rules never redact each other's markers, and a text that already holds markers is scanned
only between them: redacting twice changes nothing more.

Most messages hold no secret at all, so a cheap pre-filter decides first whether any rule
can match: one Aho-Corasick scan for every label and token prefix, a digit count (cards and
IBANs need ten or more) and the longest unbroken run (every provider token is one long
word). Past it, each detector is guarded by its own necessary condition, and the labelled
rules run case-sensitively over the lower-cased text: Python's ``re`` skips ahead on a
literal first character but not under IGNORECASE, a 10x difference per scan.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import itertools
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import ahocorasick_rs
from stdnum import bitcoin, iban, luhn

from sleepmem.core import credentials, idnumbers, placeholders

Accept = Callable[[str, re.Match[str]], bool]


class RedactionResult(NamedTuple):  # a tuple: built for every event, 3x cheaper than a dataclass
    text: str
    kinds: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


# The most a text can grow by redaction, as a factor: the longest marker is 24 characters
# ("[REDACTED:one_time_code]") and every rule needs at least 4 characters of input for one
# (a label and a value: "pw:x", "pin 1234"). Callers use it to skip the size re-check.
MAX_GROWTH = 8


def mark(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# A value never starts inside a marker already written (rules do not redact each other),
# nor at a separator that the label's optional parts left over.
_VALUE_START = r"(?!\[redacted)(?![:=：])"
# Characters that end a value in running text: whitespace, quotes, CJK punctuation and
# ideographs (Chinese has no spaces: "密码是abc123，记住" must stop at the comma).
_VALUE_CHAR = r"[^\s\"'“”‘’`，。；：、！？（）【】《》\u4e00-\u9fff]"
# "<label> is <value>": a connector is required, so "password manager" stays untouched.
_SEP = r"[\"']?\s*(?:[:=：]|\bis(?:\s+now)?\b|\bwas\b|\bare\b|是|为|為)\s*[\"'“‘`]?\s*"
# Dates, times and decimals ("2024-05-01", "12:30", "3.1415") are not codes.
# A code stands alone: digits that run on into letters are part of an id or a hash
# ("…fa55422fa6…"), never a code someone was sent.
_CODE_DIGITS = r"(?<!\d)(\d{4,8})(?![\dA-Za-z])(?![\-/.:]\d)"


@dataclass(frozen=True, slots=True)
class _Rule:
    """A pattern over lower-cased text; ``group`` is the span replaced when ``accept`` agrees."""

    kind: str
    pattern: re.Pattern[str]
    group: int = 0
    accept: Accept | None = None
    # The label may end a longer name ("bucket_key", "schemaKey", "io.jsonwebtoken"): then
    # the whole name, in any case style, says whether its value is a credential.
    named: bool = False

    @property
    def any_case(self) -> re.Pattern[str]:
        return _any_case(self.pattern)


_ANY_CASE: dict[str, re.Pattern[str]] = {}


def _any_case(pattern: re.Pattern[str]) -> re.Pattern[str]:
    # Only for the rare text whose lower() changes length (e.g. "İ"): spans would not map.
    compiled = _ANY_CASE.get(pattern.pattern)
    if compiled is None:
        compiled = _ANY_CASE[pattern.pattern] = re.compile(pattern.pattern, re.IGNORECASE)
    return compiled


# -- label words that may precede a value --------------------------------------------------
def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Words that say something about a password rather than being one ("the password is wrong").
# A value made only of these is kept; one other word and the whole phrase goes.
_PASSWORD_WORDS = frozenset(
    _words(
        "a an the my your his her our their this that same wrong incorrect correct invalid "
        "expired required needed reset changed strong weak too not still now set saved stored "
        "updated missing empty blank ok okay fine secure protected hidden in on at under "
        "written case-sensitive very really long short simple easy hard new old also "
        "different as before again unknown forgotten lost locked it is was"
    )
)
_CODE_NOT_SECRET = frozenset(
    _words(
        "zip postal post area country status error exit source promo discount coupon product "
        "item http response return dial tax reference ref tracking airport color colour region "
        "language currency sort qr bar"
    )
)
# A labelled key value must look machine-made: a digit or a symbol, or simply long.
_SECRETISH = re.compile(r"(?=.*\d)|(?=.*[^A-Za-z])|.{20,}")
# A value after a bare label ("password h2Mn!x", "pw hunter2"): a digit or a symbol in it.
_CODED = re.compile(r"(?=.{4})(?=.*[\d!@#$%^&*_+=~|\\/<>?-])")
_TRAILING = ".,;"


def _machine_made(value: str, _m: re.Match[str]) -> bool:
    return _SECRETISH.match(value) is not None


def _coded(value: str, _m: re.Match[str]) -> bool:
    return _CODED.match(value.rstrip(_TRAILING)) is not None


def _label_starts_word(m: re.Match[str]) -> bool:
    word_start = max(m.string.rfind(c, 0, m.start()) for c in " \t\n\"'") + 1
    return not any(c in ":$%{" for c in m.string[word_start : m.start()])


def _not_a_label(_value: str, m: re.Match[str]) -> bool:
    return not (m.group(2) == "code" and (m.group(1) or "") in _CODE_NOT_SECRET)


def _not_a_word(value: str, _m: re.Match[str]) -> bool:
    return value.rstrip(_TRAILING + "!?)").lower() not in _PASSWORD_WORDS


_BEARER = _Rule(
    "bearer_token", re.compile(r"(?<![a-z])bearer\s+(?!\[redacted)([a-z0-9._~+/\-]{8,}=*)"), 1
)
_KEY_LABEL = _Rule(
    "api_key",
    re.compile(
        r"(?:key|token|secret|apikey|密钥|秘钥|令牌)(?:[_\- ]?id)?(?![a-z])"
        + _SEP
        + _VALUE_START
        + r"("
        + _VALUE_CHAR
        + r"{8,})"
    ),
    1,
    _machine_made,
    named=True,
)
# Without a connector ("with secret wJalr..."), only a long mix of letters and digits counts.
_KEY_BARE = _Rule(
    "api_key",
    re.compile(
        r"(?:key|token|secret)(?![a-z])\s+"
        + _VALUE_START
        + r"((?=\S*\d)(?=\S*[a-z])[a-z0-9+/_\-]{20,}={0,2})(?![^\s,.;!?])"
    ),
    1,
)
# Labels that name a password outright: after one of these and a connector, the phrase
# that follows is the password ("my password is correct horse battery staple").
_STRONG_LABEL = r"(?:(?<![a-z])(?:password|passwd|passphrase|passcode|pwd)(?![a-z])|密码|口令|暗码)"
# "password for the office wifi is ...", "密码现在是 ...", "新密码设置为 ...".
_QUALIFIER = r"(?:\s+(?:for|to|on|of|at)(?:\s+[^\s:=：]{1,40}){1,3}?)?"
_ZH_SEP = r"(?:现在|已经|已|也|都|就)?(?:设置|设|改|更改|修改|换|变|重置)?(?:成|为|為|是)了?"
_STRONG_SEP = (
    r"[\"']?\s*(?:[:=：]|-{1,2}>?|\bis(?:\s+now)?\b|\bwas\b|\bare\b|"
    + _ZH_SEP
    + r")\s*[:：]?\s*[\"'“‘`]?\s*"
)
_OTP_STRONG = _Rule(
    "one_time_code",
    re.compile(
        # A label starts a word: "…412fa963234" in a hex id holds no "2fa" label.
        r"(?:(?<![a-z0-9])(?:otp|one[ \-]time\s+(?:pass(?:word|code)?|code|pin)|"
        r"verification(?:\s+code)?|security\s+code|log[ \-]?in\s+code|"
        r"auth(?:entication)?\s+code|2fa(?:\s+code)?|confirmation\s+code|sms\s+code)|"
        r"验证码|校验码|动态码|短信码)[^\d\n]{0,24}?" + _CODE_DIGITS
    ),
    1,
)
# Bare "code"/"pin" only counts right before the digits, and not after a harmless label.
_OTP_WEAK = _Rule(
    "one_time_code",
    re.compile(
        r"(?<![a-z0-9])(?:([a-z]+)[ \-])?(passcode|pin(?:\s+code)?|code)"
        r"\s*(?:\bis\b|[:=：#]|是|为)?\s*" + _CODE_DIGITS
    ),
    3,
    _not_a_label,
)
_OTP_AFTER = _Rule(
    "one_time_code",
    re.compile(
        _CODE_DIGITS + r"(?=[^\d\n]{0,30}?(?:\botp\b|one[ \-]time|verification|"
        r"security\s+code|log[ \-]?in\s+code|\b2fa\b|验证码|校验码|动态码))"
    ),
    1,
)


_PASSPHRASE = _Rule(
    "password",
    re.compile(
        _STRONG_LABEL
        + _QUALIFIER
        + _STRONG_SEP
        + _VALUE_START
        + r"("
        + _VALUE_CHAR
        + r"+(?:[ \t]+(?!\[redacted)"
        + _VALUE_CHAR
        + r"+){0,7})"
    ),
    1,
)
# No connector: "password h2Mn!x9", "支付密码869165", "pw hunter2", "pass: x", "PIN 4821".
# A label after ":" or "$" is the second half of a pair or a variable ("-u user:password
# https://…", "$DEPLOY_PASSWORD next"): what follows it is the next argument.
_PASSWORD_BARE = _Rule(
    "password",
    re.compile(
        r"(?:" + _STRONG_LABEL + r"|(?<![a-z])(?:pw|pass|pin)(?![a-z]))"
        r"[ \t]*" + _VALUE_START + r"(" + _VALUE_CHAR + r"{4,})"
    ),
    1,
    lambda value, m: _coded(value, m) and _label_starts_word(m),
)
_ZH_PASSWORD_BARE = _Rule(
    "password",
    re.compile(r"(?:密码|口令)[ \t]*" + _VALUE_START + r"(" + _VALUE_CHAR + r"{4,})"),
    1,
)
# The short labels with an explicit ':' or '=' ("pw: x1", "pass=abc"): the value goes.
_PASSWORD_SHORT = _Rule(
    "password",
    re.compile(
        r"(?<![a-z])(?:pw|pass|pin)(?![a-z])\s*[:=：]\s*"
        + _VALUE_START
        + r"("
        + _VALUE_CHAR
        + r"+)"
    ),
    1,
    _not_a_word,
)
# "Cookie: a=b; c=d", "Authorization: Basic dXNl...": the rest of the header line goes.
_HEADER = _Rule(
    "credentials",
    re.compile(
        r"(?<![a-z])(?:set-cookie|cookie|proxy-authorization|authorization)(?![a-z])"
        r"[\"']?\s*[:=：]\s*" + _VALUE_START + r"([^\n\"'`]{4,})"
    ),
    1,
)
_COOKIE_BARE = _Rule(
    "credentials",
    re.compile(
        r"(?<![a-z])cookies?(?![a-z])[^\n=]{0,20}?\s"
        + _VALUE_START
        + r"([a-z0-9_.\-]+=[^\s;,]{6,})"
    ),
    1,
)
# "卡号 6222 0212 3456 7890 128", "card number: 4000-1234-...": in a card context any
# long run of digits goes, checksum or not, unless a Luhn network's range and length say
# the checksum must hold and it does not (_card_checked).
_CARD_LABEL = _Rule(
    "card_number",
    re.compile(
        r"(?:卡号|银行卡|信用卡|储蓄卡|借记卡|(?<![a-z])(?:card|cc)(?:\s*(?:number|no\.?|#))?(?![a-z]))"
        r"[^\d\n]{0,12}?((?:\d[ \-\u3000]?){11,22}\d)(?!\d)"
    ),
    1,
    lambda value, m: _card_checked(value, m),
)

# -- shapes that need no label (case matters for these) -------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)"
    r"|PuTTY-User-Key-File-\d.*\Z",
    re.DOTALL,
)
_ARMOR_LINE = re.compile(r"-----(?:BEGIN|END) [A-Z0-9 ]+-----")
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")


_PUBLIC_BLOCK = re.compile(
    r"-----BEGIN ((?:PGP |RSA |SSH2 |EC )?PUBLIC KEY(?: BLOCK)?|CERTIFICATE|PGP SIGNATURE)-----"
    r".*?-----END \1-----",
    re.DOTALL,
)


def _holds_a_key(m: re.Match[str]) -> bool:
    """A private key block with a body: a complete block around "anything", or around
    nothing, is a sample of the armour; a cut-off one is kept as a key (its rest may follow
    in the next message)."""
    block = m.group(0)
    if not block.startswith("-----") or block.count("-----END") == 0:
        return True
    return _KEY_BODY.search(_ARMOR_LINE.sub(" ", block)) is not None


# scheme://user:password@host: only the password goes, the rest stays readable.
_CONN_STRING = re.compile(
    r"(?<![A-Za-z0-9+.\-])[a-zA-Z][a-zA-Z0-9+.\-]{1,30}://[^\s:/@\"']*:([^\s@/\"']+)@"
)
_JWT = re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}")
# "Authorization: Basic dXNlcjpwYXNz": only when the base64 really holds "user:password".
_BASIC = re.compile(r"(?<![A-Za-z])[Bb]asic\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
# Shapes the maintained detectors do not cover (or cover only in quotes).
_API_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe, test keys too
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}"  # AWS key ids
    r"|ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{100,}={0,2}"  # AWS Bedrock: "BedrockAPIKey-"
    r"|github_pat_[A-Za-z0-9_]{22,}|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub fine-grained
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack, any digit grouping
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"  # SendGrid
    r"|key-[0-9a-z]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}"  # Mailgun
    r"|npm_[A-Za-z0-9]{36}"  # npm
    r"|pypi-[A-Za-z0-9_\-]{50,}"  # PyPI, any issuer
    r")"
)
# Azure: a storage account key or a shared access signature, wherever it sits in a URL.
_AZURE = re.compile(
    r"(?i)(?:AccountKey|SharedAccessKey|(?<![a-z])sig)=([A-Za-z0-9%+/]{16,}(?:={1,2}|%3D){0,2})"
)
_SLACK_WEBHOOK = "hooks.slack.com"
_CARD = re.compile(r"(?<![A-Za-z0-9.\-])[1-6]\d{3}(?:[ \-\u3000]?\d){9,15}(?![A-Za-z0-9])")
# The country code and check digits an IBAN opens with: the digits after them are its body.
_IBAN_HEAD = re.compile(r"[A-Z]{2}\d{2}[ \-]\Z")
_DIGIT_GROUP = re.compile(r"\d+")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ \-]?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
_IBAN_GROUP = re.compile(r"[A-Z0-9]+")
# A bare token of letters, digits and base64 symbols: a secret if it is random enough.
# "~", "." and "=" may sit inside one (Azure client secrets: "QtT8Q~9C-_Ij~Rou…Wh.DQ3k…").
_ENTROPY_TOKEN = re.compile(
    r"(?<![A-Za-z0-9+/_\-=~.])[A-Za-z0-9+/_\-~]"
    r"(?:[A-Za-z0-9+/_\-]|[~.=](?=[A-Za-z0-9]))+={0,2}(?![A-Za-z0-9+/_\-=~])"
)
# Hex runs, with or without uuid dashes, are ids and hashes far more often than secrets.
_HEX_ID = re.compile(r"[0-9a-fA-F\-]+")
# Single-case tokens (gitleaks' providers issue many) carry less entropy per character.
_ONE_CASE_MIN_RUN = 24
_SEGMENT = re.compile(r"[^/.=]{20,}")
_ONE_CASE_ENTROPY_MIN = 3.5
_ENTROPY_MIN = 3.8
_MARKER = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
# Names written in words: camel, snake or kebab case, each word two letters or more, with
# numbers ("Ed25519", "Key128Bit", "io.jsonwebtoken"). A random token breaks into
# one-letter pieces somewhere ("…WE6F1fT9…"); a dotted name does not.
_NAME_PIECE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[_\-.]|.")


def _is_name(text: str) -> bool:
    if not text or not text[0].isalpha():
        return False
    for piece in _NAME_PIECE.findall(text):
        if piece in "_-." or piece.isdigit():
            continue
        if len(piece) < 2 or not piece.isascii() or not piece.isalpha():
            return False
    return True


def _dotted_name(token: str) -> bool:
    """A dotted name of words ("doc.Security.KeySize", "Ed25519.BlindKeySignatures"):
    word-shaped parts, and as many vowels as words have (a third of the letters; random
    letters hold a fifth)."""
    if "." not in token or not all(map(_is_name, token.split("."))):
        return False
    letters = [c for c in token.lower() if c.isalpha()]
    return sum(c in "aeiouy" for c in letters) >= _NAME_VOWEL_SHARE * len(letters)


def _assigned_name_end(token: str) -> int:
    """Where the value starts in "NAME=value" ("API_VERSION=rc0.13…"), or 0."""
    at = token.find("=")
    if 0 < at < len(token) - 1 and token[at + 1].isalnum() and _is_name(token[:at]):
        return at + 1
    return 0


_NAME_VOWEL_SHARE = 0.3


def _provider_detectors() -> tuple[type[Any], ...]:
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    return (
        AWSKeyDetector, AzureStorageKeyDetector, BasicAuthDetector, DiscordBotTokenDetector,
        GitHubTokenDetector, GitLabTokenDetector, JwtTokenDetector, MailchimpDetector,
        NpmDetector, OpenAIDetector, PypiTokenDetector, SendGridDetector, SlackDetector,
        SquareOAuthDetector, StripeDetector, TelegramBotTokenDetector, TwilioKeyDetector,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Providers:
    """The detectors' patterns as one alternation: one scan instead of one per pattern."""

    combined: re.Pattern[str]
    parts: tuple[tuple[str, re.Pattern[str]], ...]  # (secret type, pattern) by group name

    def kind(self, index: int, value: str) -> str:
        secret_type = self.parts[index][0]
        if secret_type == "JSON Web Token":
            return "jwt"
        if secret_type == "Basic Auth Credentials":
            return "password"
        return "webhook_url" if _SLACK_WEBHOOK in value.lower() else "api_key"


@functools.cache
def _providers() -> _Providers:
    # Built on first use, once per process: importing detect-secrets costs ~100 ms.
    parts: list[tuple[str, re.Pattern[str]]] = []
    for detector in _provider_detectors():
        for pattern in detector.denylist:
            parts.append((str(detector.secret_type), pattern))
    alternatives = []
    for i, (_name, pattern) in enumerate(parts):
        body = f"(?i:{pattern.pattern})" if pattern.flags & re.IGNORECASE else pattern.pattern
        alternatives.append(f"(?P<p{i}>{body})")
    return _Providers(re.compile("|".join(alternatives)), tuple(parts))


@functools.cache
def _entropy() -> Callable[[str], float]:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString(limit=_ENTROPY_MIN).calculate_shannon_entropy


def _random_enough(token: str) -> bool:
    if len(token) < _ENTROPY_MIN_RUN:
        return False
    digits = sum(c.isdigit() for c in token)
    upper = sum(c.isupper() for c in token)
    lower = sum(c.islower() for c in token)
    if digits >= 2 and upper >= 2 and lower >= 2:
        return _entropy()(token) >= _ENTROPY_MIN
    # One case only: long, several digits and letters, not a hex id or hash, not a path or
    # a dotted name; random enough by the same Shannon measure at a lower bar.
    if (
        len(token) < _ONE_CASE_MIN_RUN
        or digits < 3
        or upper + lower < 3
        or _HEX_ID.fullmatch(token)
        or "/" in token
        or "." in token
        or "=" in token
    ):
        return False
    return _entropy()(token) >= _ONE_CASE_ENTROPY_MIN


# Substring guards: a rule runs only if its trigger is present. Grouped by a character the
# whole group needs, so a plain sentence costs a dozen ``in`` tests (~1 µs) and no scan.
_DASHED_PREFIXES = _words("sk- sk_ rk_ pk_ ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ glpat- xox hf_")
_UPPER_PREFIXES = _words("AKIA ASIA AGPA AIDA AROA AIza ABSK")
_KEY_WORDS = _words("key token secret 密钥 秘钥 令牌")
_PASS_WORDS = _words("pass pwd pw pin 密码 口令 暗码")
_HEADER_WORDS = _words("cookie authorization")
_CARD_WORDS = _words("card 卡号 银行卡 信用卡 储蓄卡 借记卡")
# Words whose presence lets the credential-intent readings run (credentials.py).
_INTENT_WORDS = _words(
    "pass pw pin key token secret seed mnemonic auth credential --user -u "
    "密码 口令 密钥 秘钥 令牌 助记词 种子"
)
_CODE_WORDS = (*_words("code otp pin verif 2fa one-time 验证码 校验码 动态码 短信码"), "one time")
# Every byte but ASCII digits: len(ascii.translate(None, this)) counts digits ~5x faster
# than ten str.count calls.
_NOT_DIGIT_BYTES = bytes(b for b in range(256) if not 0x30 <= b <= 0x39)
# Nothing shorter can hold a recognisable secret ("pwd=x"): most meta values skip all checks.
_SHORTEST_SECRET = 5
_CARD_MIN_DIGITS = 13
_CARD_LABEL_MIN_DIGITS = 12
_IBAN_MIN_DIGITS = 10  # the fewest digits any IBAN holds (NL: 4 letters of bank code)
_ID_MIN_DIGITS = 6  # the fewest any national id holds (ES NIE: X1234567L, 7)
# Every provider token is one unbroken run at least this long ("xoxb-2048-...", "AC0f3...").
_TOKEN_MIN_RUN = 16
_TOKEN_MIN_DIGITS = 2
_ENTROPY_MIN_RUN = 20
# Every word a guard below tests for, lower-cased: no hit (and too few digits, no long run)
# means no rule can match. Built from the guards' own lists so the two cannot drift apart.
_TRIGGERS = ahocorasick_rs.AhoCorasick(
    sorted(
        {
            *_KEY_WORDS,
            *_PASS_WORDS,
            *_HEADER_WORDS,
            *_CARD_WORDS,
            *_CODE_WORDS,
            *_DASHED_PREFIXES,
            *(w.lower() for w in _UPPER_PREFIXES),
            *("private key", "putty-user-key", "://", "eyj", "bearer", "basic", "sg."),
            # Prefixes of tokens the long-run test might miss for want of digits.
            *("accountkey", "sharedaccesskey", "sig=", "sq0", "npm_", "pypi-", "glpat"),
            *_INTENT_WORDS,
        }
    )
)
_LONG_RUN = re.compile(r"[!-~]{" + str(_TOKEN_MIN_RUN) + ",}")
_RUN_16 = b"x" * _TOKEN_MIN_RUN
_RUN_20 = b"x" * _ENTROPY_MIN_RUN


def _has_trigger(low: str) -> bool:
    return bool(_TRIGGERS.find_matches_as_indexes(low))


def _any_in(words: tuple[str, ...], text: str) -> bool:
    return any(map(text.__contains__, words))


_ANY_DIGIT = re.compile(r"\d")


def _digit_count(text: str) -> int:
    if text.isascii():
        return len(text.encode("ascii").translate(None, _NOT_DIGIT_BYTES))
    return len(_ANY_DIGIT.findall(text))  # full-width and other Unicode digits count too


# ASCII whitespace to b" ", every other byte to b"x": a run of 16 b"x" is a long word.
_RUN_BYTES = bytes(0x20 if b < 0x21 or b > 0x7E else 0x78 for b in range(256))


def _longest_run(text: str) -> int:
    """Length of the longest run of printable ASCII without a space (exact up to 20)."""
    if text.isascii():
        mapped = text.encode("ascii").translate(_RUN_BYTES)
        if _RUN_16 not in mapped:  # a C substring search: 4x cheaper than text.split()
            return 0
        return _ENTROPY_MIN_RUN if _RUN_20 in mapped else _TOKEN_MIN_RUN
    return max((len(m) for m in _LONG_RUN.findall(text)), default=0)


def _public_address(token: str) -> bool:
    """A Bitcoin address that passes its own checksum (base58check, bech32 or bech32m):
    what one is paid to, published by its owner; the key that spends from it is another
    string."""
    if not 26 <= len(token) <= 90 or token[0] not in "13bB":
        return False
    try:
        return bool(bitcoin.is_valid(token)) or _bech32m_address(token)
    except Exception:  # a validator refusing odd input refuses the token
        return False


_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32M = 0x2BC830A3  # BIP 350: the checksum constant of witness versions 1-16
_BC_HRP = (3, 3, 0, 2, 3)  # "bc" expanded for the checksum (BIP 173)


def _bech32m_address(token: str) -> bool:
    """A taproot (or later witness version) address, which stdnum does not read yet."""
    low = token.lower()
    if token not in (low, token.upper()) or not low.startswith("bc1") or len(low) < 14:
        return False
    if any(c not in _BECH32 for c in low[3:]):
        return False
    data = [_BECH32.index(c) for c in low[3:]]
    return 1 <= data[0] <= 16 and bitcoin.bech32_checksum([*_BC_HRP, *data]) == _BECH32M


def _luhn_ok(digits: str) -> bool:
    try:
        return bool(luhn.is_valid(digits))
    except ValueError:  # a digit that is not 0-9 (full-width, Arabic-Indic...)
        return False


# One in ten random digit runs passes Luhn: the checksum alone does not make a card. Words
# before the number decide; without any, the number must also have a card network's
# prefix and length (ISO/IEC 7812 issuer ranges).
def _word_alternation(words: str, ideographs: str) -> re.Pattern[str]:
    english = "|".join(words.split())
    return re.compile(rf"(?<![a-z])(?:{english})(?![a-z])|" + "|".join(ideographs.split()))


_CARD_CONTEXT = _word_alternation(
    "card cards visa mastercard amex discover unionpay jcb diners maestro cc cvv expiry "
    "expires exp",
    "卡 刷卡 付款 支付",
)
_NOT_A_CARD = _word_alternation(
    "order tracking invoice ref reference id booking confirmation shipment parcel ticket "
    "transaction receipt serial sku isbn imei phone tel customer case no",
    "订单 单号 运单 快递 编号 流水号",
)
_CARD_LOOKBACK = 40
# (IIN range, lengths, whether the network's rules make every number pass Luhn). UnionPay,
# UATP and Maestro issue numbers that need not.
_NETWORKS: tuple[tuple[tuple[int, int], frozenset[int], bool], ...] = (
    ((4, 4), frozenset({13, 16, 19}), True),  # Visa
    ((51, 55), frozenset({16}), True),  # Mastercard
    ((2221, 2720), frozenset({16}), True),  # Mastercard 2-series
    ((34, 34), frozenset({15}), True),  # American Express
    ((37, 37), frozenset({15}), True),
    ((6011, 6011), frozenset({16, 17, 18, 19}), True),  # Discover
    ((644, 649), frozenset({16, 17, 18, 19}), True),
    ((65, 65), frozenset({16, 17, 18, 19}), True),
    ((62, 62), frozenset({16, 17, 18, 19}), False),  # UnionPay
    ((3528, 3589), frozenset({16, 17, 18, 19}), True),  # JCB
    ((300, 305), frozenset({14}), True),  # Diners Club
    ((36, 36), frozenset({14}), True),
    ((38, 39), frozenset({14, 16}), True),
    ((1, 1), frozenset({15}), False),  # UATP
    ((50, 50), frozenset({16, 17, 18, 19}), False),  # Maestro, Dankort (5019)
    ((56, 58), frozenset({16, 17, 18, 19}), False),  # Maestro
    ((67, 67), frozenset({16, 17, 18, 19}), False),  # Maestro (UK 6759)
    ((2200, 2204), frozenset({16, 17, 18, 19}), True),  # Mir
)


def _network(digits: str) -> tuple[tuple[int, int], frozenset[int], bool] | None:
    """The card network whose issuer range and lengths ``digits`` has, if any."""
    for network in _NETWORKS:
        (low, high), lengths, _ = network
        prefix = int(digits[: len(str(low))])
        if low <= prefix <= high and len(digits) in lengths:
            return network
    return None


def _network_shaped(digits: str) -> bool:
    return _network(digits) is not None


def _card_checked(value: str, _m: re.Match[str]) -> bool:
    """A number a card word names goes, checksum or not, unless its issuer range and length
    are a network's whose numbers all pass Luhn and it fails: then it is no card that
    network issued (a mistyped or made-up one), and no card of any other."""
    digits = "".join(_DIGIT_GROUP.findall(value))
    network = _network(digits)
    return network is None or not network[2] or _luhn_ok(digits)


def _card_in_context(low: str, start: int, digits: str) -> bool:
    before = low[max(0, start - _CARD_LOOKBACK) : start]
    if _CARD_CONTEXT.search(before):
        return True
    if _NOT_A_CARD.search(before):
        return False
    return _network_shaped(digits)


def _basic_credentials(m: re.Match[str]) -> bool:
    value = m.group(1)
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (ValueError, binascii.Error):
        return False
    return b":" in decoded


def _phrase(value: str) -> tuple[int, int] | None:
    """The part of a value after a password label that is the password, or None.

    One token with a digit or a symbol is the password ("hunter2-Prod! and I like tea");
    otherwise the words up to the end of the clause are a passphrase, unless every one of
    them only says something about the password ("is wrong", "is still the same").
    """
    tokens = [m.span() for m in _TOKEN.finditer(value)]
    first = value[tokens[0][0] : tokens[0][1]]
    if _CODED.match(first.rstrip(_TRAILING + "!?")) is not None:
        return tokens[0][0], _strip_end(value, *tokens[0])
    taken: list[tuple[int, int]] = []
    for start, end in tokens[:_PASSPHRASE_WORDS]:
        taken.append((start, end))
        if value[end - 1] in _TRAILING + "!?":
            break
    words = [value[s:e].rstrip(_TRAILING + "!?").lower() for s, e in taken]
    if all(w in _PASSWORD_WORDS or not w for w in words):
        return None
    return taken[0][0], _strip_end(value, *taken[-1])


_TOKEN = re.compile(r"\S+")
_PASSPHRASE_WORDS = 6


def _strip_end(value: str, start: int, end: int) -> int:
    while end - 1 > start and value[end - 1] in _TRAILING:
        end -= 1
    return end


class _Finder:
    """The secrets of one text as spans over it; overlapping spans become one marker."""

    __slots__ = ("low", "public", "said", "same_length", "spans", "text")

    def __init__(self, text: str, low: str) -> None:
        self.text = text
        self.low = low
        self.same_length = len(low) == len(text)
        self.spans: list[tuple[int, int, str]] = []
        # Indexes of spans found only by what the text calls them, not by their shape
        # (placeholders.py): a value said to be a secret may be anything someone chose.
        self.said: set[int] = set()
        # Complete armoured blocks that are public by their header (certificates, public
        # keys, signatures): their base64 body is random and published, not a secret.
        self.public: list[tuple[int, int]] = []

    def rule(
        self, rule: _Rule, trim: Callable[[str], tuple[int, int] | None] | None = None
    ) -> None:
        pattern = rule.pattern if self.same_length else rule.any_case
        haystack = self.low if self.same_length else self.text
        for m in pattern.finditer(haystack):
            start, end = m.span(rule.group)
            value = self.text[start:end]
            if rule.accept is not None and not rule.accept(value, m):
                continue
            if rule.named and not self.names_a_secret_at(m.start()):
                continue
            if trim is not None:
                cut = trim(value)
                if cut is None:
                    continue
                start, end = start + cut[0], start + cut[1]
            self.spans.append((start, end, rule.kind))

    def names_a_secret_at(self, at: int) -> bool:
        """Whether the name a label at ``at`` is part of names a credential: the label
        itself ("key", "token"), or a longer name whose words say so ("db_api_key")."""
        text = self.text
        start = end = at
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
            start -= 1
        while end < len(text) and (text[end].isalnum() or text[end] in "_-"):
            end += 1
        name = text[start:end]
        return name.lower() in _KEY_WORDS or credentials.names_a_secret(name)

    def shape(
        self,
        kind: str,
        pattern: re.Pattern[str],
        group: int = 0,
        accept: Callable[[re.Match[str]], bool] | None = None,
    ) -> None:
        for m in pattern.finditer(self.text):
            if accept is None or accept(m):
                self.spans.append((*m.span(group), kind))

    def providers(self) -> None:
        providers = _providers()
        text = self.text
        for m in providers.combined.finditer(text):
            index = int((m.lastgroup or "p0")[1:])
            secret_type, pattern = providers.parts[index]
            start, end = m.span()
            if secret_type == "Basic Auth Credentials":
                own = pattern.match(text, start)
                if own is not None:
                    start, end = own.span(1)
            else:
                if start > 0 and text[start - 1].isalnum() and _SLACK_WEBHOOK not in m.group(0):
                    # A token starts a word: "TODAYINASIAASACK…" holds no AWS key id (some
                    # detectors' patterns have no boundary before the prefix).
                    continue
                # A detector may stop short of the token's end ("sk_live_" + 24 of 32).
                while end < len(text) and (text[end].isalnum() or text[end] in "_-+/="):
                    end += 1
            self.spans.append((start, end, providers.kind(index, text[start:end])))

    def intent(self) -> None:
        """Values a credential noun, a secret-named key or a flag claims (credentials.py)."""
        text = self.text
        for start, end, cls in credentials.claimed_values(text):
            self.spans.append((start, end, _INTENT_KINDS[cls]))
        for start, end in credentials.assigned_values(text):
            self.said.add(len(self.spans))
            self.spans.append((start, end, "secret"))
        for start, end in credentials.seed_phrases(text):
            self.spans.append((start, end, "secret"))

    def cards(self) -> None:
        for m in _CARD.finditer(self.text):
            if _IBAN_HEAD.search(self.text, max(0, m.start() - 5), m.start()):
                continue  # "RS35 2600 0560 …": an IBAN's body, whatever its checksum says
            raw = m.group(0)
            groups = list(_DIGIT_GROUP.finditer(raw))
            # A run may swallow a trailing number ("4111 1111 1111 1111 2024"): drop groups
            # from the right until the digits pass Luhn or get too short for a card.
            while groups:
                digits = "".join(g.group(0) for g in groups)
                if len(digits) < _CARD_MIN_DIGITS:
                    break
                if len(digits) <= 19 and _luhn_ok(digits):
                    if _card_in_context(self.low, m.start(), digits):
                        self.spans.append((m.start(), m.start() + groups[-1].end(), "card_number"))
                    break
                groups.pop()

    def id_numbers(self) -> None:
        # Context words are read in the lower-case text, when its offsets are the text's.
        self.spans.extend(idnumbers.find(self.text, self.low if self.same_length else self.text))

    def ibans(self) -> None:
        for m in _IBAN.finditer(self.text):
            raw = m.group(0)
            groups = list(_IBAN_GROUP.finditer(raw))
            while groups:
                candidate = raw[: groups[-1].end()]
                # Structure and mod 97, not stdnum's bank registries: a bank missing from
                # their snapshot still holds accounts.
                if iban.is_valid(candidate, check_country=False):
                    self.spans.append((m.start(), m.start() + len(candidate), "iban"))
                    break
                groups.pop()

    def random_tokens(self) -> None:
        for m in _ENTROPY_TOKEN.finditer(self.text):
            token = m.group(0)
            # "API_VERSION=rc0.13…": the name is not part of the value; the value is scored
            # alone (the secret-named ones go by credentials.assigned_values).
            cut = _assigned_name_end(token)
            offset = m.start() + cut
            token = token[cut:]
            if _public_address(token) or _dotted_name(token):
                continue
            if _random_enough(token.rstrip("=")):
                self.spans.append((offset, offset + len(token), "secret"))
            elif "/" in token or "." in token or "=" in token:
                # A URL or a path: a random segment of it ("hooks…/services/<token>").
                for part in _SEGMENT.finditer(token):
                    if _random_enough(part.group(0)):
                        self.spans.append((offset + part.start(), offset + part.end(), "secret"))

    def result(self) -> RedactionResult:
        if not self.spans:
            return RedactionResult(self.text, ())
        # Merge overlapping spans; each merged span keeps the kind found first (the
        # detectors run most specific first).
        order = sorted(range(len(self.spans)), key=lambda i: self.spans[i][:2])
        # A value a shape detector also found is judged by its shape: a provider's prefix
        # and filler is no key anyone issued, whatever the key it is assigned to is called.
        shaped = {self.spans[i][:2] for i in range(len(self.spans)) if i not in self.said}
        merged: list[list[Any]] = []
        for i in order:
            start, end, kind = self.spans[i]
            said = i in self.said and (start, end) not in shaped
            if any(a <= start and end <= b for a, b in self.public):
                continue
            # A reference, a template, a mask or a slot's name holds nothing to leak.
            if placeholders.stands_in(self.text, start, end, kind, said=said):
                continue
            # A clause break after a value is the sentence's, not the secret's: keeping it
            # keeps "key is X, I use OpenAI" two clauses (the extractor reads the second).
            while (
                end > start
                and self.text[end - 1] in _CLAUSE_BREAKS
                and (end == len(self.text) or self.text[end].isspace())
            ):
                end -= 1
            if start >= end:
                continue
            if merged and start < merged[-1][1]:
                last = merged[-1]
                last[1] = max(last[1], end)
                if i < last[3]:
                    last[2], last[3] = kind, i
            else:
                merged.append([start, end, kind, i])
        if not merged:
            return RedactionResult(self.text, ())
        out: list[str] = []
        last_end = 0
        for start, end, kind, _i in merged:
            out += (self.text[last_end:start], mark(kind))
            last_end = end
        out.append(self.text[last_end:])
        return RedactionResult("".join(out), tuple(m[2] for m in merged))


_CLAUSE_BREAKS = frozenset(",;，；、。")
_INTENT_KINDS = {"password": "password", "pin": "password", "key": "api_key", "seed": "secret"}


def _worth_scanning(text: str, low: str) -> bool:
    return bool(_TRIGGERS.find_matches_as_indexes(low)) or _numbers_worth_scanning(text)


def _numbers_worth_scanning(text: str) -> bool:
    """The pre-filter past the trigger words: enough digits, or a long run with digits."""
    if not text.isascii():
        digits = _digit_count(text)
        return _digits_worth_scanning(text, digits) or (
            digits >= _TOKEN_MIN_DIGITS and _longest_run(text) >= _TOKEN_MIN_RUN
        )
    # _digit_count and _longest_run inline, over one encoding of the text: this runs for
    # every content of every event, and their calls and second encode were a third of it.
    raw = text.encode("ascii")
    digits = len(raw.translate(None, _NOT_DIGIT_BYTES))
    if digits >= _IBAN_MIN_DIGITS:
        return True
    # A provider token without a trigger prefix is a long run with digits in it (Twilio,
    # Telegram, Mailchimp, Discord, random keys): the run is only measured then.
    if digits < _TOKEN_MIN_DIGITS or _RUN_16 in raw.translate(_RUN_BYTES):
        return digits >= _TOKEN_MIN_DIGITS
    # An id number: six digits close together (idnumbers.may_hold_one, inline).
    return (
        digits >= _ID_MIN_DIGITS
        and idnumbers.DENSE_CLASSES.search(raw.translate(idnumbers.CLASSES, idnumbers.LETTERS))
        is not None
    ) or (digits >= idnumbers.MBI_MIN_DIGITS and idnumbers.MBI.search(text) is not None)


def _digits_worth_scanning(text: str, digits: int, ascii_bytes: bytes | None = None) -> bool:
    # Ten digits may make an IBAN or a card; from six, only when close together (an id).
    return (
        digits >= _IBAN_MIN_DIGITS
        or (digits >= _ID_MIN_DIGITS and idnumbers.may_hold_one(text, ascii_bytes))
        or (digits >= idnumbers.MBI_MIN_DIGITS and idnumbers.MBI.search(text) is not None)
    )


def redact_text(text: str) -> str:
    """``redact(text).text``: the text itself when it holds no secret, without building a
    result (the common case, once per event content and meta string)."""
    if len(text) < _SHORTEST_SECRET:
        return text
    if not _worth_scanning(text, text.lower()):
        return text
    return redact(text).text


def redact_texts(
    texts: Sequence[str],
    turns: TurnContexts | None = None,
    session_of: Callable[[int], Hashable] | None = None,
) -> list[str]:
    """``[redact_text(t) for t in texts]``, with one trigger scan over all of them.

    With ``turns``, ``session_of(i)`` names the session of ``texts[i]`` (asked only of texts
    that may claim or leave a value: most never are), and a credential noun
    left waiting in one message of a session claims the value in its next (see
    ``TurnContext``).

    No trigger word holds a line break, so none matches across the line breaks that join
    the texts: the texts with a trigger are exactly those in which a match starts.
    """
    if len(texts) < 2 and turns is None:
        return [redact_text(t) for t in texts]
    lows = [t.lower() for t in texts]
    triggered: set[int] = set()
    matches = _TRIGGERS.find_matches_as_indexes("\n".join(lows))
    if matches:
        # Where each text's line break is, in characters: text i starts after ends[i - 1].
        ends = list(itertools.accumulate(len(low) + 1 for low in lows))
        triggered = {bisect.bisect_right(ends, start) for _pattern, start, _end in matches}
    out: list[str] = []
    for i, text in enumerate(texts):
        claimed = text
        if turns is not None and turns.waiting and session_of is not None:
            claimed = turns.claim(session_of(i), text)
        if claimed is not text:
            text = redact(claimed).text
        elif len(text) >= _SHORTEST_SECRET and (i in triggered or _numbers_worth_scanning(text)):
            text = redact(text).text
        out.append(text)
        # Intent words are trigger words: a text without a trigger leaves nothing waiting.
        if turns is not None and session_of is not None and i in triggered:
            turns.leave(session_of(i), text)
    return out


# How much of a message a waiting noun is kept with: its reach is _REACH words.
_WAITING_TAIL = 320
# The value a noun left waiting claims is said in a short message of its own ("4471"); a
# longer one is a new subject, and stays within the size validation measured.
_CLAIMED_MESSAGE_MAX = 256
_INTENT_SCAN = ahocorasick_rs.AhoCorasick(sorted(set(_INTENT_WORDS)))


def _waiting_part(redacted: str) -> str:
    """The part of a redacted message in which a credential noun may still wait for its
    value, or "": what precedes a marker already had its value taken."""
    low = redacted.lower()
    if not _INTENT_SCAN.find_matches_as_indexes(low):
        return ""
    cut = redacted.rfind("[REDACTED:")
    if cut >= 0:
        cut = redacted.find("]", cut) + 1
        if not _INTENT_SCAN.find_matches_as_indexes(low[cut:]):
            return ""
    tail = redacted[max(cut, len(redacted) - _WAITING_TAIL, 0) :]
    return tail if tail.strip() else ""


def _claim_next(waiting: str, text: str) -> tuple[str, str] | None:
    """``text`` with the value a noun waiting in ``waiting`` claims replaced, and its kind."""
    if len(text) > _CLAIMED_MESSAGE_MAX:
        return None
    cut = len(waiting) + 1
    for start, end, cls in credentials.claimed_values(f"{waiting}\n{text}"):
        if start < cut:
            return None  # the noun's value is in its own message: nothing waits
        kind = _INTENT_KINDS[cls]
        return text[: start - cut] + mark(kind) + text[end - cut :], kind
    return None


class TurnContexts:
    """Credential nouns left waiting at the end of a message, by session.

    "my bank pin is in the next message" / "4471": the noun is said in one message and its
    value in the next one of the same session. A message's redacted tail is kept while it
    holds a credential noun, and the session's next message is read after it; a message
    that claims or leaves nothing clears it. Only redacted text is kept, at most
    ``max_sessions`` sessions (the oldest goes first).
    """

    __slots__ = ("max_sessions", "waiting")

    def __init__(self, max_sessions: int = 4096) -> None:
        self.max_sessions = max_sessions
        self.waiting: dict[Hashable, str] = {}

    def claim(self, session: Hashable, text: str) -> str:
        """``text`` with the value a noun waiting in this session claims marked, or
        ``text`` itself; the session waits no longer either way."""
        waiting = self.waiting.pop(session, None)
        if waiting is None:
            return text
        claimed = _claim_next(waiting, text)
        return text if claimed is None else claimed[0]

    def leave(self, session: Hashable, redacted: str) -> None:
        """Keep what of ``redacted`` (a message already redacted) may wait for a value."""
        part = _waiting_part(redacted)
        if part:
            if len(self.waiting) >= self.max_sessions:
                self.waiting.pop(next(iter(self.waiting)))
            self.waiting[session] = part

    def redact(self, session: Hashable, text: str) -> RedactionResult:
        """``redact(text)`` for the next message of ``session``, in the session's context."""
        kinds: tuple[str, ...] = ()
        if self.waiting:
            waiting = self.waiting.pop(session, None)
            claimed = _claim_next(waiting, text) if waiting is not None else None
            if claimed is not None:
                text, kinds = claimed[0], (claimed[1],)
        result = redact(text)
        self.leave(session, result.text)
        return RedactionResult(result.text, kinds + result.kinds) if kinds else result

    def redact_text(self, session: Hashable, text: str) -> str:
        """``redact_text(text)`` in the session's context: the common case costs one scan."""
        if self.waiting and session in self.waiting:
            return self.redact(session, text).text
        if len(text) < _SHORTEST_SECRET:
            return text
        low = text.lower()
        if not _TRIGGERS.find_matches_as_indexes(low):
            return redact(text).text if _numbers_worth_scanning(text) else text
        out = redact(text).text
        self.leave(session, out)
        return out


class TurnContext:
    """The context of one turn: its messages redacted in order, so that a credential noun
    in one ("what's the wifi password?") claims the value sent in the next ("bluejay42")."""

    __slots__ = ("_turns",)
    _SESSION = "turn"

    def __init__(self) -> None:
        self._turns = TurnContexts(max_sessions=1)

    def redact(self, text: str) -> RedactionResult:
        return self._turns.redact(self._SESSION, text)

    def redact_text(self, text: str) -> str:
        return self._turns.redact_text(self._SESSION, text)


def redact_turn(messages: Sequence[str]) -> list[str]:
    """``redact_text`` over the messages of one turn, where a credential noun in one message
    also claims the value sent in the next ("what's the wifi password?" / "bluejay42").
    """
    turn = TurnContext()
    return [turn.redact_text(m) for m in messages]


def redact(text: str) -> RedactionResult:
    """Replace every secret in ``text``; ``kinds`` names what was found, once per secret.

    Markers already in the text are left as they are and never scanned: redacting a
    redacted text changes nothing.
    """
    if len(text) < _SHORTEST_SECRET:
        return RedactionResult(text, ())
    low = text.lower()
    if not _worth_scanning(text, low):
        return RedactionResult(text, ())
    # Only a marker as written ("[REDACTED:kind]") splits the text: "[redacted:x]" or
    # "[Redacted:API]" are words like any other (splitting on them found no marker and
    # recursed on the whole text until the stack ran out).
    if "[redacted:" not in low or _MARKER.search(text) is None:
        return _redact_segment(text, low)
    out: list[str] = []
    kinds: list[str] = []
    last = 0
    for m in _MARKER.finditer(text):
        part = redact(text[last : m.start()]) if m.start() > last else RedactionResult("", ())
        out += (part.text, m.group(0))
        kinds += part.kinds
        last = m.end()
    tail = redact(text[last:])
    out.append(tail.text)
    kinds += tail.kinds
    return RedactionResult("".join(out), tuple(kinds))


def _redact_segment(text: str, low: str) -> RedactionResult:
    f = _Finder(text, low)
    if "-----BEGIN " in text:
        f.public = [m.span() for m in _PUBLIC_BLOCK.finditer(text)]
    if "PRIVATE KEY" in text or "PuTTY-User-Key" in text:
        f.shape("private_key", _PRIVATE_KEY, 0, _holds_a_key)
    if "://" in text:
        f.shape("password", _CONN_STRING, 1)
    if "eyJ" in text:
        f.shape("jwt", _JWT)
    if "bearer" in low:
        f.rule(_BEARER)
    if "basic" in low:
        f.shape("password", _BASIC, 1, _basic_credentials)
    digits = _digit_count(text)
    run = _longest_run(text) if digits >= _TOKEN_MIN_DIGITS or _has_trigger(low) else 0
    if run >= _TOKEN_MIN_RUN:
        f.shape("api_key", _API_KEY)
        f.providers()
        f.shape("api_key", _AZURE, 1)
    if _any_in(_KEY_WORDS, low):
        f.rule(_KEY_LABEL)
        f.rule(_KEY_BARE)
    if digits >= 4 and _any_in(_CODE_WORDS, low):
        f.rule(_OTP_STRONG)
        f.rule(_OTP_WEAK)
        f.rule(_OTP_AFTER)
    if _any_in(_PASS_WORDS, low):
        f.rule(_PASSPHRASE, _phrase)
        f.rule(_PASSWORD_BARE)
        f.rule(_ZH_PASSWORD_BARE)
        f.rule(_PASSWORD_SHORT)
    if _any_in(_INTENT_WORDS, low):
        f.intent()
    if _any_in(_HEADER_WORDS, low):
        f.rule(_HEADER)
        f.rule(_COOKIE_BARE)
    if digits >= _CARD_MIN_DIGITS:
        f.cards()
    if digits >= _CARD_LABEL_MIN_DIGITS and _any_in(_CARD_WORDS, low):
        f.rule(_CARD_LABEL)
    if digits >= _IBAN_MIN_DIGITS:
        f.ibans()
    if digits >= _ID_MIN_DIGITS and idnumbers.may_hold_one(text):
        f.id_numbers()
    if digits >= idnumbers.MBI_MIN_DIGITS:
        f.spans.extend(idnumbers.medicare_beneficiary_ids(text))
    if run >= _ENTROPY_MIN_RUN:
        f.random_tokens()
    return f.result()


@functools.lru_cache(maxsize=8192)
def secret_in_ids(values: tuple[str, ...]) -> tuple[int, str] | None:
    """(index, kind) of the first value holding a secret, or None; see contains_secret.

    Cached per tuple: an agent's events repeat the same tenant, agent, user and session.
    """
    for i, value in enumerate(values):
        if value and (kind := contains_secret(value)) is not None:
            return i, kind
    return None


def contains_secret(text: str) -> str | None:
    """The kind of the first secret in ``text`` by shape or label, or None.

    For ids and names, which are stored and logged as they are: random-looking tokens are
    not counted here (a random id is not a secret), everything else is.
    """
    result = _ids_redact(text)
    return result.kinds[0] if result.kinds else None


@functools.lru_cache(maxsize=8192)
def _ids_redact(text: str) -> RedactionResult:
    # Ids repeat from event to event (tenant, agent, user): checked once per distinct value.
    result = redact(text)
    kinds = tuple(k for k in result.kinds if k != "secret")
    if len(kinds) == len(result.kinds):
        return result
    return RedactionResult(result.text, kinds)


# Keys whose value is a secret whatever it looks like ({"password": "x"}).
_SECRET_KEY_NAME = re.compile(
    r"(?i)^(?:.*[_\-.\s])?(?:password|passwd|passphrase|passcode|pwd|pw|pass|secret|token|"
    r"api[_\-]?key|apikey|access[_\-]?key(?:[_\-]?id)?|private[_\-]?key|authorization|cookie|"
    r"credentials?|otp|pin|cvv|cvc|card[_\-]?(?:number|no)|iban|sig|signature|"
    r".*密码|验证码|密钥|秘钥|令牌|卡号)$"
)


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    # Meta keys repeat from event to event: the regex runs once per distinct key.
    return _SECRET_KEY_NAME.match(key) is not None or credentials.names_a_secret(key)


_SCALARS = (str, int, float)  # by exact type: a bool is not a secret
_PLAIN = frozenset({str, int, float, bool, type(None)})


class _KeyFacts(NamedTuple):
    clean: str  # the key redacted: the key itself when it holds no secret
    secret_name: bool  # a scalar under this key is a secret whatever it looks like


_KEY_FACTS: dict[str, _KeyFacts] = {}
_KEY_FACTS_MAX = 4096


def _key_facts(key: str) -> _KeyFacts:
    # A plain dict rather than lru_cache: this runs for every meta key of every event, and
    # keys repeat from event to event, so each one is redacted and matched once.
    facts = _KEY_FACTS.get(key)
    if facts is None:
        if len(_KEY_FACTS) >= _KEY_FACTS_MAX:
            _KEY_FACTS.clear()
        facts = _KEY_FACTS[key] = _KeyFacts(redact_text(key), _secret_key(key))
    return facts


def redact_json(obj: Any) -> Any:
    """Redact every string in a JSON value; a scalar under a secret-named key goes whole.

    Returns ``obj`` itself when nothing changed, so callers can tell by identity.
    """
    kind = type(obj)
    if kind is str:
        return redact_text(obj)
    if kind is dict:
        out: dict[Any, Any] | None = None
        for key, value in obj.items():
            secret_name = False
            if type(key) is str:
                facts = _KEY_FACTS.get(key) or _key_facts(key)
                # A key may hold a secret too ({"sk-...": 1}).
                if facts.clean != key:
                    return redact_json({_clean_key(k): v for k, v in obj.items()})
                secret_name = facts.secret_name
            vkind = type(value)
            if secret_name and vkind in _SCALARS and value != "" and not _stands_in(value):
                clean = mark("secret")
            elif vkind in _PLAIN and not (vkind is str and len(value) >= _SHORTEST_SECRET):
                # Numbers, booleans and short strings hold no secret by shape; only a
                # secret-named key can make them one.
                clean = value
            else:
                clean = redact_json(value)
            if clean is not value and out is None:
                out = dict(obj)
            if out is not None:
                out[key] = clean
        return obj if out is None else out
    if isinstance(obj, list | tuple):
        items = [redact_json(v) for v in obj]
        # An argv: ["--password", "X"] gives X away as "--password X" would.
        for i in range(len(items) - 1):
            if (
                _secret_flag(items[i])
                and type(items[i + 1]) is str
                and items[i + 1]
                and not _stands_in(items[i + 1])
            ):
                items[i + 1] = mark("secret")
        return obj if all(a is b for a, b in zip(items, obj, strict=True)) else items
    if isinstance(obj, str):  # a str subclass
        return redact(obj).text
    return obj


def _stands_in(value: Any) -> bool:
    # {"password": "${DB_PASSWORD}"} names where the password is kept; {"pin": "0000"} is one.
    return type(value) is str and placeholders.stands_in(value, 0, len(value), "password")


def _secret_flag(item: Any) -> bool:
    return (
        type(item) is str
        and item.startswith("-")
        and "=" not in item
        and len(item) <= 42
        and _secret_key(item.lstrip("-"))
    )


def _clean_key(key: Any) -> Any:
    return _key_facts(key).clean if type(key) is str else key
