"""Secret redaction: the write gate's first rule, applied before anything reaches disk or logs.

Secrets are replaced by ``[REDACTED:<kind>]``. Patterns are precompiled and written for the
general shape of each secret (prefixes, separators, checksums), not for known strings.
Most messages hold no secret at all, so one Aho-Corasick scan for every rule's trigger
words decides first whether any rule can match (0.5 µs for a sentence, where a substring
test per word took 3). Past it, each rule is guarded by its own substring tests, and the
labelled rules run case-sensitively over the lower-cased text: Python's ``re`` skips ahead
on a literal first character but not under IGNORECASE, a 10x difference per scan.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import ahocorasick_rs

Accept = Callable[[str, re.Match[str]], bool]


class RedactionResult(NamedTuple):  # a tuple: built for every event, 3x cheaper than a dataclass
    text: str
    kinds: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


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
_CODE_DIGITS = r"(?<!\d)(\d{4,8})(?!\d)(?![\-/.:]\d)"


@dataclass(frozen=True, slots=True)
class _Rule:
    """A pattern over lower-cased text; ``group`` is the span replaced when ``accept`` agrees."""

    kind: str
    pattern: re.Pattern[str]
    group: int = 0
    accept: Accept | None = None

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


_PASSWORD_WORDS = frozenset(
    _words(
        "a an the my your his her our their this that same wrong incorrect correct invalid "
        "expired required needed reset changed strong weak too not still now set saved stored "
        "updated missing empty blank ok okay fine secure protected hidden in on at under "
        "written case-sensitive"
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


def _machine_made(value: str, _m: re.Match[str]) -> bool:
    return _SECRETISH.match(value) is not None


def _not_a_word(value: str, _m: re.Match[str]) -> bool:
    return value.rstrip(".,;!?)").lower() not in _PASSWORD_WORDS


def _not_a_label(_value: str, m: re.Match[str]) -> bool:
    return not (m.group(2) == "code" and (m.group(1) or "") in _CODE_NOT_SECRET)


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
_PASSWORD = _Rule(
    "password",
    re.compile(
        r"(?:(?<![a-z])(?:password|passwd|passphrase|pwd)(?![a-z])|密码|口令)"
        r"(?:\s+(?:for|to|on|of|at)(?:\s+[^\s:=：]{1,40}){1,3}?)?"
        + _SEP
        + _VALUE_START
        + r"("
        + _VALUE_CHAR
        + r"+)"
    ),
    1,
    _not_a_word,
)
_OTP_STRONG = _Rule(
    "one_time_code",
    re.compile(
        r"(?:(?<![a-z])(?:otp|one[ \-]time\s+(?:pass(?:word|code)?|code|pin)|"
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
        r"(?<![a-z])(?:([a-z]+)[ \-])?(passcode|pin(?:\s+code)?|code)"
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

# -- shapes that need no label (case matters for these) -------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
    re.DOTALL,
)
# scheme://user:password@host: only the password goes, the rest stays readable.
_CONN_STRING = re.compile(
    r"(?<![A-Za-z0-9+.\-])[a-zA-Z][a-zA-Z0-9+.\-]{1,30}://[^\s:/@\"']*:"
    r"(?!\[REDACTED)([^\s@/\"']+)@"
)
_JWT = re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}")
_API_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}"  # AWS key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"  # SendGrid
    r")"
)
_CARD = re.compile(r"(?<![A-Za-z0-9.\-])[2-6]\d{3}(?:[ \-]?\d){9,15}(?![A-Za-z0-9])")
_DIGIT_GROUP = re.compile(r"\d+")

# Substring guards: a rule runs only if its trigger is present. Grouped by a character the
# whole group needs, so a plain sentence costs a dozen ``in`` tests (~1 µs) and no scan.
_DASHED_PREFIXES = _words("sk- sk_ rk_ pk_ ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ glpat- xox hf_")
_UPPER_PREFIXES = _words("AKIA ASIA AGPA AIDA AROA AIza")
_KEY_WORDS = _words("key token secret 密钥 秘钥 令牌")
_PASS_WORDS = _words("pass pwd 密码 口令")
_CODE_WORDS = (*_words("code otp pin verif 2fa one-time 验证码 校验码 动态码 短信码"), "one time")
# Every byte but ASCII digits: len(ascii.translate(None, this)) counts digits ~5x faster
# than ten str.count calls.
_NOT_DIGIT_BYTES = bytes(b for b in range(256) if not 0x30 <= b <= 0x39)
# Nothing shorter can hold a recognisable secret ("pwd=x"): most meta values skip all checks.
_SHORTEST_SECRET = 5
_CARD_MIN_DIGITS = 13
# Every word a guard below tests for, lower-cased: no hit (and too few digits for a card)
# means no rule can match. Built from the guards' own lists so the two cannot drift apart.
_TRIGGERS = ahocorasick_rs.AhoCorasick(
    sorted(
        {
            *_KEY_WORDS,
            *_PASS_WORDS,
            *_CODE_WORDS,
            *_DASHED_PREFIXES,
            *(w.lower() for w in _UPPER_PREFIXES),
            *("private key", "://", "eyj", "bearer", "sg."),
        }
    )
)


def _any_in(words: tuple[str, ...], text: str) -> bool:
    return any(map(text.__contains__, words))


_ANY_DIGIT = re.compile(r"\d")


def _digit_count(text: str) -> int:
    if text.isascii():
        return len(text.encode("ascii").translate(None, _NOT_DIGIT_BYTES))
    return len(_ANY_DIGIT.findall(text))  # full-width and other Unicode digits count too


def _has_token_prefix(text: str, low: str) -> bool:
    return (
        (("-" in text or "_" in text) and _any_in(_DASHED_PREFIXES, low))
        or ("A" in text and _any_in(_UPPER_PREFIXES, text))
        or "SG." in text
    )


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


class _Redactor:
    """One call's state: the text as it is being rewritten, its lower case, what was found."""

    __slots__ = ("found", "low", "text")

    def __init__(self, text: str, low: str) -> None:
        self.text = text
        self.low = low
        self.found: list[str] = []

    def rule(self, rule: _Rule) -> None:
        same_length = len(self.low) == len(self.text)
        pattern = rule.pattern if same_length else rule.any_case
        haystack = self.low if same_length else self.text
        out: list[str] = []
        last = 0
        for m in pattern.finditer(haystack):
            start, end = m.span(rule.group)
            value = self.text[start:end]
            if rule.accept is not None and not rule.accept(value, m):
                continue
            out += (self.text[last:start], mark(rule.kind))
            self.found.append(rule.kind)
            last = end
        if out:
            out.append(self.text[last:])
            self.text = "".join(out)
            self.low = self.text.lower()

    def shape(self, kind: str, pattern: re.Pattern[str], group: int = 0) -> None:
        def sub(m: re.Match[str]) -> str:
            self.found.append(kind)
            whole = m.group(0)
            if not group:
                return mark(kind)
            base = m.start()
            return whole[: m.start(group) - base] + mark(kind) + whole[m.end(group) - base :]

        before = len(self.found)
        self.text = pattern.sub(sub, self.text)
        if len(self.found) != before:
            self.low = self.text.lower()

    def cards(self) -> None:
        def sub(m: re.Match[str]) -> str:
            raw = m.group(0)
            groups = list(_DIGIT_GROUP.finditer(raw))
            # A run may swallow a trailing number ("4111 1111 1111 1111 2024"): drop groups
            # from the right until the digits pass Luhn or get too short for a card.
            while groups:
                digits = "".join(g.group(0) for g in groups)
                if len(digits) < 13:
                    break
                if len(digits) <= 19 and _luhn_ok(digits):
                    self.found.append("card_number")
                    return mark("card_number") + raw[groups[-1].end() :]
                groups.pop()
            return raw

        self.text = _CARD.sub(sub, self.text)


def redact(text: str) -> RedactionResult:
    """Replace every secret in ``text``; ``kinds`` names what was found, once per secret."""
    if len(text) < _SHORTEST_SECRET:
        return RedactionResult(text, ())
    low = text.lower()
    if not _TRIGGERS.find_matches_as_indexes(low) and _digit_count(text) < _CARD_MIN_DIGITS:
        return RedactionResult(text, ())
    shapes = "PRIVATE KEY" in text or "://" in text or "eyJ" in text or "bearer" in low
    tokens = _has_token_prefix(text, low)
    keyed = _any_in(_KEY_WORDS, low)
    passwords = _any_in(_PASS_WORDS, low)
    digits = _digit_count(text)
    codes = digits >= 4 and _any_in(_CODE_WORDS, low)
    if not (shapes or tokens or keyed or passwords or codes or digits >= _CARD_MIN_DIGITS):
        return RedactionResult(text, ())

    r = _Redactor(text, low)
    if shapes:
        if "PRIVATE KEY" in r.text:
            r.shape("private_key", _PRIVATE_KEY)
        if "://" in r.text:
            r.shape("password", _CONN_STRING, 1)
        if "eyJ" in r.text:
            r.shape("jwt", _JWT)
        if "bearer" in r.low:
            r.rule(_BEARER)
    if tokens:
        r.shape("api_key", _API_KEY)
    if keyed:
        r.rule(_KEY_LABEL)
        r.rule(_KEY_BARE)
    if passwords:
        r.rule(_PASSWORD)
    if digits >= _CARD_MIN_DIGITS:
        r.cards()
    if codes:
        r.rule(_OTP_STRONG)
        r.rule(_OTP_WEAK)
        r.rule(_OTP_AFTER)
    return RedactionResult(r.text, tuple(r.found))


# Keys whose value is a secret whatever it looks like ({"password": "x"}).
_SECRET_KEY_NAME = re.compile(
    r"(?i)^(?:.*[_\-.\s])?(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|apikey|"
    r"access[_\-]?key(?:[_\-]?id)?|private[_\-]?key|authorization|cookie|otp|pin|cvv|cvc|"
    r"card[_\-]?number|密码|验证码|密钥|令牌)$"
)


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    # Meta keys repeat from event to event: the regex runs once per distinct key.
    return _SECRET_KEY_NAME.match(key) is not None


_SCALARS = (str, int, float)  # by exact type: a bool is not a secret
_PLAIN = frozenset({str, int, float, bool, type(None)})


def redact_json(obj: Any) -> Any:
    """Redact every string in a JSON value; a scalar under a secret-named key goes whole.

    Returns ``obj`` itself when nothing changed, so callers can tell by identity.
    """
    kind = type(obj)
    if kind is str:
        return redact(obj).text if len(obj) >= _SHORTEST_SECRET else obj
    if kind is dict:
        out: dict[Any, Any] | None = None
        for key, value in obj.items():
            vkind = type(value)
            if vkind in _PLAIN and not (vkind is str and len(value) >= _SHORTEST_SECRET):
                # Numbers, booleans and short strings hold no secret by shape; only a
                # secret-named key can make them one.
                clean = (
                    mark("secret")
                    if vkind in _SCALARS and value != "" and type(key) is str and _secret_key(key)
                    else value
                )
            elif vkind in _SCALARS and type(key) is str and _secret_key(key) and value != "":
                clean = mark("secret")
            else:
                clean = redact_json(value)
            if clean is not value and out is None:
                out = dict(obj)
            if out is not None:
                out[key] = clean
        return obj if out is None else out
    if isinstance(obj, list | tuple):
        items = [redact_json(v) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj, strict=True)) else items
    if isinstance(obj, str):  # a str subclass
        return redact(obj).text
    return obj
