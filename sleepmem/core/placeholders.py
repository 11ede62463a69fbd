"""Values that stand in for a secret without being one: references, templates, masks, slots.

Configs, commands and messages often say where a secret comes from, or show its shape,
instead of giving it: ``${DB_PASSWORD}``, ``$API_KEY``, ``{{ .Values.password }}``,
``needs.vault.outputs.token``, ``os.environ["TOKEN"]``, ``<your-token>``,
``ghp_xxxxxxxx…``, ``Token **********``, ``-u username:password``. Whichever detector
found such a span, it holds nothing to leak: redaction drops it (``stands_in``). A
provider's documented sample (``AKIAIOSFODNN7EXAMPLE``) is not one of them: it has a live
key's shape, and nobody reading a chat can tell it from one.

A literal stays a value, however weak: ``changeme``, ``test`` or ``12345678`` after a
password label is a password (a value said to be a password goes, whatever it is). So a
run of one repeated character is filler only in a token-shaped span (a provider key, a
random token, a key label's value), where no issuer would make one; for a password only
the mask characters (``x``, ``*``, ``#`` …) are. A counting run in a provider's shape
(``ghp_1234567890abcdef…``) is what people type to try a redactor, and is redacted.
"""

from __future__ import annotations

import re

from sleepmem.core import credentials

# Tokens an issuer generates: no issuer makes one of a repeated character. Every other
# kind (passwords, PINs, codes, card, bank and id numbers) is a value someone chose or was
# given, whatever it looks like.
_ISSUED_KINDS = frozenset({"api_key", "secret", "credentials", "bearer_token", "jwt"})


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# -- references and templates -------------------------------------------------------------
# ${NAME}, ${NAME:-default}, $(command), {{ .Values.x }}, #{x}, %NAME% and {name}.
_TEMPLATE = re.compile(
    r"\$\{|\$\(|\{\{|\{%|#\{|%[A-Za-z_][\w]*%|\{[A-Za-z_][\w.\-]*(?::[^{}\s]*)?\}(?![\w}])"
)
# $NAME: a shell, Makefile or PHP variable. "$ecret12" is a literal that starts with "$";
# a variable is upper-case or snake_case, or its name says what it holds ($password).
_DOLLAR_NAME = re.compile(r"\$([A-Za-z_][\w]*)")
# <your-token>, <SUMOLOGIC ACCESS KEY>: a slot to fill in, closed on the same line.
_SLOT = re.compile(r"<[A-Za-z_][\w .\-]{0,60}>")
# config.db.password, secrets.GITHUB_TOKEN, $.Values.password: a path to where it is kept.
_PATH = re.compile(r"[$@]?\.?[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)+")
# The name at the end of such a path is a config key's: words of two letters or more
# (a random base64 segment of a token has digits or one-letter pieces).
_CONFIG_NAME = re.compile(r"[A-Za-z][A-Za-z_\-]*")
# os.environ["X"], os.getenv("X"), process.env.X, vault.read(…): code that fetches it.
_LOOKUP = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+[\[(]")
# --user, -Password: a flag, whose value is the next word, not the flag.
_FLAG = re.compile(r"--?[A-Za-z][\w\-]*")
# "GITHUB_API_KEY=" or "jdbc.url:" at a line's end: the next key, not this one's value.
_NEXT_KEY = re.compile(r"[A-Za-z_$][\w.\-:]*[=:]")

# -- masks and filler -----------------------------------------------------------------------
_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest|apikey)\s+")
# What a mask is written with, and what joins a token's parts.
_MASK_RUN = re.compile(r"[xX]{4,}|[*•●#]{3,}")
_MASK_CHARS = frozenset("xXyYzZ*#•●.-_?")
_SEPARATORS = re.compile(r"[\W_]+")
# What is left of a value once its filler is taken out: a provider's prefix at most
# ("AKIA", "ghp", "4b1d"), or a quarter of a masked value ("github_pat_xxxx…").
_RESIDUE_MAX = 6
_MASKED_RESIDUE_SHARE = 0.25


# -- slot words --------------------------------------------------------------------------------
# A value spelled only with these names the slot it fills ("username:password",
# "your-api-key-here").
_SLOT_WORDS = _set(
    "password passwords passwd pwd pw pass passphrase passcode pin secret secrets token "
    "tokens key keys apikey api access id client app bot service account auth credential "
    "credentials user username name login email my your here put insert replace enter "
    "example sample placeholder dummy fake value string random some"
)


def stands_in(text: str, start: int, end: int, kind: str, *, said: bool = False) -> bool:
    """Whether ``text[start:end]``, found as a secret of ``kind``, only stands in for one.

    ``said``: the value was found by what the text calls it (a secret-named key or flag),
    not by its shape, so it may be anything someone chose.
    """
    value = text[start:end]
    if not value:
        return False
    if _reference(text, start, value):
        return True
    if (
        _NEXT_KEY.fullmatch(value)
        and any(sep in value[:-1] for sep in ("_", ".", "::"))
        and (end == len(text) or text[end].isspace())
    ):
        return True
    bare = _SCHEME.sub("", value, count=1) if kind in ("credentials", "bearer_token") else value
    chosen = said or kind not in _ISSUED_KINDS
    return _masked(bare, chosen=chosen) or _slot_named(bare, chosen=chosen)


def _reference(text: str, start: int, value: str) -> bool:
    # The span may start inside the reference's opener ("${" before "PASSWORD}").
    before = text[max(0, start - 2) : start]
    if before.endswith(("${", "{{", "$(", "%{", "#{")) or (
        before.endswith("{") and value.rstrip("}").replace("_", "").isalnum()
    ):
        return True
    if _TEMPLATE.match(value) or _SLOT.match(text, start):
        return True
    if before.endswith("<") and _SLOT.match(text, start - 1):
        return True
    dollar = _DOLLAR_NAME.match(value)
    if dollar is not None:
        name = dollar.group(1)
        if "_" in name or name.isupper() or credentials.names_a_secret(name):
            return True
    if _FLAG.fullmatch(value) or _LOOKUP.match(text, start):
        return True
    if _PATH.fullmatch(value) is None:
        return False
    last = value.rsplit(".", 1)[-1]
    return (
        _CONFIG_NAME.fullmatch(last) is not None
        and all(len(w) >= 2 for w in credentials.name_words(last))
        and credentials.names_a_secret(last)
    )


def _masked(value: str, *, chosen: bool) -> bool:
    """Mask characters ("xxxx", "****") with next to nothing else left, or, in a token,
    one character repeated."""
    if len(value) >= 3 and len(set(value)) == 1 and (not chosen or value[0] in _MASK_CHARS):
        return True
    unmasked = _SEPARATORS.sub("", _MASK_RUN.sub("", value))
    return len(unmasked) < len(value) and (
        len(unmasked) <= _RESIDUE_MAX or len(unmasked) <= _MASKED_RESIDUE_SHARE * len(value)
    )


def _slot_named(value: str, *, chosen: bool) -> bool:
    words = credentials.name_words(value)
    # "your_password", "<password>", "-u username:password": spelled as a name. One run
    # together with a capital or a digit ("MyPassword1") is a password someone chose.
    # A provider's shape spelled with "EXAMPLE" or "Here" ("AKIAIOSFODNN7EXAMPLE") is not:
    # a reader cannot tell a documented sample pasted into a chat from a live key, and a
    # false positive on a fake key costs nothing.
    return bool(_SPELLED_NAME.fullmatch(value)) and all(w in _SLOT_WORDS for w in words)


# One word, or words joined by "_", "-", "." or spaces, each all lower or all upper case.
_SPELLED_NAME = re.compile(r"(?:[a-z]+|[A-Z]+)(?:[_\-. ](?:[a-z]+|[A-Z]+))*")
