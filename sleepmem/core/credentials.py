"""What a value is said to be: credential intent, read from names and from prose.

Redaction's shape detectors know what a provider token looks like; this module knows what
a person or a config calls a secret. Three readings, each a mechanism rather than one
pattern per phrasing:

- a name in any case style (``dbPassword``, ``db_password``, ``db-password``,
  ``db.password``, ``DB_PASSWORD``, ``--client-secret``) is split into words, and the words
  say whether what it names is a credential;
- an assignment or a command-line flag with such a name (``clientSecret := "…"``,
  ``--password X``, ``-ClientSecret 'X'``) gives its value away;
- in prose (English and Chinese), a credential noun (password, pw, pin, passcode, token,
  key, secret, seed, 密码, 口令, 密钥 …) claims the first value-shaped word that follows it
  in the same turn, across a colon, a clause or a sentence: "my netflix pw is hunter22",
  "the pin for the door is 4471", "密码是我生日 19900307".

This sits in core, below the language packs, so it tokenises lightly itself: words are runs
of non-space, non-CJK characters and every CJK ideograph is a word of its own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# -- names ----------------------------------------------------------------------------------
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[\u4e00-\u9fff]+")

# Words that name a credential on their own.
_SECRET_WORDS = _set(
    "password passwords passwd passphrase passcode pwd pw pass secret secrets token "
    "apikey credential credentials otp pin cvv cvc mnemonic seed auth authorization "
    "cookie sig signature privatekey accesskey"
)  # fmt: skip
# Words that make a "key" (or "id") a credential: "api key", "signing key", "access key id".
_KEY_QUALIFIERS = _set(
    "api access private secret signing client master encryption account shared app "
    "consumer license licence webhook session refresh bot service"
)  # fmt: skip
# A name that says it is not the secret but something about it.
_NOT_THE_VALUE = _set(
    "length len min max policy hint reset expiry expires expired expiration required "
    "field label prompt placeholder type strength count enabled disabled url uri path file "
    "name names header id ids regex pattern rule rules manager changed updated at size "
    "source variable"
)  # fmt: skip
_ZH_SECRET = ("密码", "口令", "密钥", "秘钥", "令牌", "验证码", "助记词", "卡号")


def name_words(name: str) -> tuple[str, ...]:
    """A name in any case style, as lower-case words: ``dbPassword`` -> ("db", "password")."""
    return tuple(w.lower() for w in _CAMEL.findall(name))


@functools.lru_cache(maxsize=8192)
def names_a_secret(name: str) -> bool:
    """Whether a key, variable or flag with this name holds a credential."""
    if any(z in name for z in _ZH_SECRET):
        return True
    words = name_words(name)
    if not words or len(words) > 8:
        return False
    if words[-1] in _NOT_THE_VALUE or (len(words) > 1 and words[-2:] == ("user", "name")):
        return False
    for i, w in enumerate(words):
        if w in _SECRET_WORDS:
            return True
        if w in ("key", "keys", "id") and i > 0 and words[i - 1] in _KEY_QUALIFIERS:
            return w != "id" or words[i - 1] in ("access", "secret")
    return False


# -- assignments and flags --------------------------------------------------------------------
# NAME <op> VALUE in config and code: "=", ":=", "::=", "?=", ".=", "=>", ":", with quotes.
_ASSIGN = re.compile(
    r"(?<![\w$.-])[$@]?[\"']?([A-Za-z_][\w.\-]{1,60})[\"']?\s*"
    r"(?::{0,3}=|\?=|\.=|=>|:(?!//))\s*"
    r"([\"'`]?)([^\s\"'`,;<>(){}\[\]]{4,})"
)
# --name VALUE / --name=VALUE / -Name 'VALUE' (PowerShell): a flag that names a secret.
_FLAG = re.compile(r"(?<![\w-])--?([A-Za-z][\w\-]{1,40})(?:=|\s+)([\"']?)([^\s\"']{3,})")


_AUTH_SCHEMES = _set("bearer basic digest token negotiate")
# curl's and friends' "--user name:password" (and "-u"): the part after the colon.
_USER_FLAG = re.compile(r"(?<![\w-])(?:--user|-u)[=\s]+[\"']?[^\s:\"']+:[\"']?([^\s\"'@]{3,})")


def assigned_values(text: str) -> Iterator[tuple[int, int]]:
    """Spans of values assigned to, or passed as, a secret-named key or flag."""
    for m in _USER_FLAG.finditer(text):
        yield m.span(1)
    for pattern in (_ASSIGN, _FLAG):
        for m in pattern.finditer(text):
            value = m.group(3)
            if (
                names_a_secret(m.group(1))
                and not _describes(value)
                and value.lower() not in _AUTH_SCHEMES  # the token after it has its own rule
                and "[REDACTED" not in value
            ):
                yield m.span(3)


# -- prose -------------------------------------------------------------------------------------
_WORD = re.compile(r"[\u4e00-\u9fff]|[^\s\u4e00-\u9fff，。；：、！？（）【】《》“”‘’]+")
_EDGE = "\"'`“”‘’()[]{}<>.,;:!?，。；：、！？"
# The nouns, by the shape of the value they claim.
_PASSWORD_NOUNS = _set("password passwords passwd pwd pw pws pass passcode passcodes passphrase")
_PIN_NOUNS = _set("pin pins pincode")
_KEY_NOUNS = _set("token tokens key keys secret secrets apikey")
_SEED_NOUNS = _set("seed mnemonic")
# Chinese nouns are several ideographs; the tokeniser yields them one by one.
_ZH_NOUNS = {"密码": "password", "口令": "password", "暗码": "password", "密钥": "key",
             "秘钥": "key", "令牌": "key", "助记词": "seed", "种子": "seed"}  # fmt: skip
_CONNECTORS = _set("is are was = : -> 是 为 為 成")
# How far a noun reaches: the rest of its clause, the next clause or the next sentence.
_REACH = 24
_DATE_OR_TIME = re.compile(
    r"^(?:\d{1,4}[-/.]\d{1,2}(?:[-/.]\d{1,4})?|\d{1,2}:\d{2}(?::\d{2})?(?:am|pm)?|"
    r"\d{1,2}(?:am|pm|st|nd|rd|th|s|k|m|h|x|%)|[$€£¥]\d[\d,.]*|\d[\d,.]*[$€£¥%]|\d+\.\d+)$",
    re.IGNORECASE,
)
_WORDS_ABOUT_IT = _set(
    "a an the my your his her our their this that same wrong incorrect correct invalid "
    "expired required needed reset changed strong weak too not still now set saved stored "
    "updated missing empty blank ok okay fine secure protected hidden in on at under "
    "written case-sensitive very really long short simple easy hard new old also "
    "different as before again unknown forgotten lost locked it is was"
)


def _describes(value: str) -> bool:
    return value.strip(_EDGE).lower() in _WORDS_ABOUT_IT


def _words(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(text)]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in _EDGE:
        start += 1
    while end > start and text[end - 1] in _EDGE:
        end -= 1
    return start, end


# Words joined by hyphens or apostrophes ("one-time", "John's"): prose, not a password.
_PLAIN_WORDS = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*")


def _clause_ends(text: str, end: int) -> bool:
    rest = text[end:].lstrip(" \t\"'`”’)")
    return not rest or rest[0] in ".,;!?\n，。；！？"


def _password_shaped(word: str) -> bool:
    """A password said in prose has a digit or a symbol in it, and is no date or amount."""
    if len(word) < 4 or word.startswith("[REDACTED"):
        return False
    if word.isdigit():
        return True
    if _DATE_OR_TIME.match(word) or _PLAIN_WORDS.fullmatch(word):
        return False
    return any(c.isdigit() for c in word) or any(not c.isalnum() for c in word)


def _pin_shaped(word: str) -> bool:
    return word.isdigit() and 4 <= len(word) <= 8


def _key_shaped(word: str) -> bool:
    return (
        len(word) >= 12
        and any(c.isdigit() for c in word)
        and any(c.isalpha() for c in word)
        and not word.startswith("[REDACTED")
    )


_SHAPES = {
    "password": _password_shaped,
    "pin": _pin_shaped,
    "key": _key_shaped,
    "seed": _key_shaped,
}


def _noun_at(words: list[tuple[int, int, str]], i: int) -> tuple[str, int] | None:
    """(class, index of the noun's last word) when a credential noun starts at word i."""
    w = words[i][2].strip(_EDGE).lower()
    if w[:1] in ("$", "%"):
        return None  # "$DEPLOY_PASSWORD", "%DB_PASSWORD%": a variable, whose value is elsewhere
    for zh, cls in _ZH_NOUNS.items():
        n = len(zh)
        if "".join(x[2] for x in words[i : i + n]) == zh:
            return cls, i + n - 1
    if w in _PASSWORD_NOUNS:
        return "password", i
    if w in _PIN_NOUNS:
        return "pin", i
    if w in _KEY_NOUNS:
        return "key", i
    if w in _SEED_NOUNS:
        return "seed", i
    if w.upper() == "PIN" or (w.endswith(("password", "passwords")) and _NAME.fullmatch(w)):
        return "password", i
    return None


# A word that ends with a noun is one name ("wifipassword", "db_password"), not a pair
# ("deploy:$DEPLOY_PASSWORD", "username:password") whose second half is a reference or a slot.
_NAME = re.compile(r"[\w.\-]+")


def claimed_values(text: str) -> Iterator[tuple[int, int, str]]:
    """Spans of values that a credential noun in ``text`` claims, with the noun's class."""
    words = _words(text)
    i = 0
    while i < len(words):
        found = _noun_at(words, i)
        if found is None:
            i += 1
            continue
        cls, last = found
        shaped = _SHAPES[cls]
        # "pass" is a verb as often as a noun: it claims a value only right after "is" or ":".
        if words[last][2].lower().strip(_EDGE) == "pass" and not (
            words[last][2].endswith(":")
            or (last + 1 < len(words) and words[last + 1][2].lower() in _CONNECTORS)
        ):
            i = last + 1
            continue
        after_connector = False
        for j in range(last + 1, min(len(words), last + 1 + _REACH)):
            start, end = _strip(text, words[j][0], words[j][1])
            word = text[start:end]
            if not word:
                continue
            if word.lower() in _CONNECTORS or text[words[j][0] : words[j][1]] in (":", "："):
                after_connector = True
                continue
            if shaped(word):
                yield start, end, cls
                break
            if after_connector and cls == "password" and not _describes(word):
                # A plain word right after "is" is the password only when it ends the
                # clause ("my pw is sunshine"); one that goes on says something about it
                # ("passwords are hashed with argon2").
                if _clause_ends(text, words[j][1]):
                    if len(word) >= 4:
                        yield start, end, cls
                    break
                if word.isascii() and word.isalpha():
                    break
            after_connector = words[j][2].endswith((":", "："))
            if _noun_at(words, j) is not None:
                break  # another credential noun claims what follows
        i = last + 1


def seed_phrases(text: str) -> Iterator[tuple[int, int]]:
    """A seed or recovery phrase: 12 to 24 lower-case words after its noun and a connector."""
    for m in _SEED_PHRASE.finditer(text):
        yield m.span(1)


_SEED_PHRASE = re.compile(
    r"(?i:seed|mnemonic|recovery)(?:\s+(?i:phrase|words))?\s*(?:is|are|:|=)\s*"
    r"((?:[a-z]{3,8}[ ,]+){11,23}[a-z]{3,8})"
)
