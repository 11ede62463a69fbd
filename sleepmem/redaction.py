"""Secret redaction: the write gate's first rule, applied before anything reaches disk or logs.

Secrets are replaced by ``[REDACTED:<kind>]``. Patterns are precompiled and written for the
general shape of each secret (prefixes, separators, checksums), not for known strings.
Most messages hold no secret at all, so each rule is guarded by a cheap prefilter and the
common case costs a handful of C-level regex scans.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MARK = "[REDACTED:{}]"

# A value never starts inside a marker we already wrote, so rules do not redact each other.
_NOT_MARKED = r"(?!\[REDACTED)"

# Characters that end a value in running text: whitespace, quotes and CJK punctuation or
# ideographs (Chinese text has no spaces, "密码是abc123，记住" must stop at the comma).
_VALUE_CHARS = r"[^\s\"'“”‘’`，。；：、！？（）【】《》\u4e00-\u9fff]"


@dataclass(frozen=True, slots=True)
class RedactionResult:
    text: str
    kinds: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


def _mark(kind: str) -> str:
    return MARK.format(kind)


# -- private keys and connection strings -----------------------------------------------------
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
    re.DOTALL,
)
# scheme://user:password@host - only the password is replaced, the rest stays readable.
_CONN_STRING = re.compile(
    r"\b([a-zA-Z][a-zA-Z0-9+.\-]{1,30}://[^\s:/@\"']*:)" + _NOT_MARKED + r"([^\s@/\"']+)(@)"
)

# -- tokens with a recognisable shape --------------------------------------------------------
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}")
_BEARER = re.compile(r"\b([Bb]earer\s+)" + _NOT_MARKED + r"([A-Za-z0-9._~+/\-]{8,}=*)")
_API_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"  # OpenAI/Anthropic
    r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"  # SendGrid
    r")"
)

# -- "<label> is <value>" forms --------------------------------------------------------------
_SEP = r"\s*(?:[:=：]|\bis\b(?:\s+now)?|\bwas\b|是|为|為)?\s*[\"'“‘`]?\s*"
_KEY_LABEL = re.compile(
    r"(?i)(?<![A-Za-z])((?:api|app|client|access|secret|private|auth|session|refresh|bearer|"
    r"personal\s+access)?[_\- ]?(?:key|token|secret)(?:[_\- ]?id)?|apikey|密钥|秘钥|令牌|"
    r"访问密钥|api\s*密钥)"
    + _SEP
    + _NOT_MARKED
    + r"("
    + _VALUE_CHARS
    + r"{8,})"
)
_PASSWORD = re.compile(
    r"(?i)(?<![A-Za-z])((?:pass(?:word|wd|phrase|code)?|pwd|密码|口令)"
    r"(?:\s+(?:for|to|on|of|at)\s+[^\s:=]{1,40})?"
    + _SEP
    + r")"
    + _NOT_MARKED
    + r"("
    + _VALUE_CHARS
    + r"+)"
)
# Words that commonly follow "password is" without being one ("the password is wrong").
_PASSWORD_WORDS = frozenset(
    "a an the my your his her our their this that same wrong incorrect correct invalid "
    "expired required needed reset changed strong weak too not still now set saved "
    "stored updated missing empty blank ok okay fine secure protected hidden".split()
)
# A keyed value must look machine-made: some digits or symbols, or simply long.
_SECRETISH = re.compile(r"(?=.*\d)|.{20,}|(?=.*[^A-Za-z])")

# -- numbers ---------------------------------------------------------------------------------
_CARD = re.compile(r"(?<![\w.\-])[2-6]\d{3}(?:[ \-]?\d){9,15}(?![\w])")
_OTP_BEFORE = re.compile(
    r"(?i)(?<![A-Za-z])([a-z]+[ \-])?"
    r"(otp|one[ \-]time\s+(?:pass(?:word|code)?|code|pin)|verification(?:\s+code)?|"
    r"security\s+code|login\s+code|auth(?:entication)?\s+code|2fa(?:\s+code)?|"
    r"confirmation\s+code|sms\s+code|passcode|pin(?:\s+code)?|code|"
    r"验证码|校验码|动态码|动态密码|短信码)"
    r"[^\d\n]{0,24}?(?<!\d)(\d{4,8})(?!\d)"
)
_OTP_AFTER = re.compile(
    r"(?i)(?<!\d)(\d{4,8})(?!\d)(?=[^\d\n]{0,30}?(?:otp\b|one[ \-]time|verification|"
    r"security\s+code|login\s+code|2fa|验证码|校验码|动态码|动态密码))"
)
# "zip code 94107", "error code 5003": a label word before "code" that is not a secret.
_CODE_NOT_SECRET = frozenset(
    "zip postal post area country status error exit source promo discount coupon product "
    "item http response return dial tax reference ref tracking airport color colour "
    "region language currency sort".split()
)

# Cheap guards: a rule runs only if its trigger can appear in the text at all.
_HAS_DIGIT_RUN = re.compile(r"\d{4}")
_KEYISH = re.compile(r"(?i)key|token|secret|密钥|秘钥|令牌")
_PASSISH = re.compile(r"(?i)pass|pwd|密码|口令")
_TOKENISH = re.compile(
    r"sk-|[rsp]k_|AKIA|ASIA|AGPA|AIDA|AROA|gh[pousr]_|github_pat_|glpat-|xox|AIza|hf_|SG\."
)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_sub(found: list[str]) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        raw = m.group(0)
        groups = re.split(r"[ \-]", raw)
        # A run may swallow a trailing number ("4111 1111 1111 1111 2024"): drop groups
        # from the right until the digits pass Luhn or get too short.
        while groups:
            digits = "".join(groups)
            if len(digits) < 13:
                return raw
            if len(digits) <= 19 and _luhn_ok(digits):
                found.append("card_number")
                kept = raw[len(" ".join(groups)) :] if " " in raw else raw[len("-".join(groups)) :]
                return _mark("card_number") + kept
            groups.pop()
        return raw

    return sub


def _otp_before_sub(found: list[str]) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        label_word = (m.group(1) or "").strip(" -").lower()
        keyword = m.group(2).lower()
        if keyword == "code" and label_word in _CODE_NOT_SECRET:
            return m.group(0)
        found.append("one_time_code")
        start, end = m.span(3)
        whole = m.group(0)
        base = m.start(0)
        return whole[: start - base] + _mark("one_time_code") + whole[end - base :]

    return sub


def _keyed_sub(
    found: list[str], kind: str, *, stop_words: frozenset[str] = frozenset()
) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        value = m.group(2)
        bare = value.rstrip(".,;!?)").lower()
        if bare in stop_words or not bare:
            return m.group(0)
        if kind == "api_key" and not _SECRETISH.match(value):
            return m.group(0)
        found.append(kind)
        return m.group(1) + _mark(kind)

    return sub


def redact(text: str) -> RedactionResult:
    """Replace every secret in ``text``; ``kinds`` lists what was found, one per secret."""
    if not text:
        return RedactionResult(text, ())
    found: list[str] = []

    def count(kind: str) -> Callable[[re.Match[str]], str]:
        def sub(_m: re.Match[str]) -> str:
            found.append(kind)
            return _mark(kind)

        return sub

    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(count("private_key"), text)
    if "://" in text:
        text = _CONN_STRING.sub(
            lambda m: (found.append("connection_password"), m.group(1) + _mark("password") + "@")[1],
            text,
        )
    if "eyJ" in text:
        text = _JWT.sub(count("jwt"), text)
    if "earer" in text:
        text = _BEARER.sub(
            lambda m: (found.append("bearer_token"), m.group(1) + _mark("bearer_token"))[1], text
        )
    if _TOKENISH.search(text):
        text = _API_KEY.sub(count("api_key"), text)
    if _KEYISH.search(text):
        text = _KEY_LABEL.sub(_keyed_sub(found, "api_key"), text)
    if _PASSISH.search(text):
        text = _PASSWORD.sub(_keyed_sub(found, "password", stop_words=_PASSWORD_WORDS), text)
    if _HAS_DIGIT_RUN.search(text):
        text = _CARD.sub(_card_sub(found), text)
        text = _OTP_BEFORE.sub(_otp_before_sub(found), text)
        text = _OTP_AFTER.sub(count("one_time_code"), text)
    return RedactionResult(text, tuple(found))


# Meta keys whose value is a secret whatever it looks like ({"password": "x"}).
_SECRET_KEY_NAME = re.compile(
    r"(?i)^(?:.*[_\-.\s])?(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|apikey|"
    r"access[_\-]?key(?:[_\-]?id)?|private[_\-]?key|authorization|cookie|otp|pin|cvv|cvc|"
    r"card[_\-]?number|密码|验证码|密钥|令牌)$"
)


def redact_json(obj: Any) -> Any:
    """Redact every string in a JSON value; values under secret-named keys go whole."""
    if isinstance(obj, str):
        return redact(obj).text
    if isinstance(obj, dict):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if (
                isinstance(key, str)
                and value not in (None, "")
                and not isinstance(value, bool | dict | list)
                and _SECRET_KEY_NAME.match(key)
            ):
                out[key] = _mark("secret")
            else:
                out[key] = redact_json(value)
        return out
    if isinstance(obj, list | tuple):
        return [redact_json(v) for v in obj]
    return obj
