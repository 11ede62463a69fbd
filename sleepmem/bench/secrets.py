"""A corpus of made-up secrets in English, Chinese and mixed sentences, and the redaction score.

Every secret is generated from a seed in the real format of its kind (prefixes, lengths,
alphabets, Luhn and IBAN checksums), so none is a real credential. Each case says which
bytes must never be found anywhere after the event was emitted: the secret itself.

    sleepmem bench secrets --json [--per-kind 50] [--locomo path/to/locomo.json]
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ahocorasick_rs

from sleepmem.core.redaction import redact

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
LOWER_ALNUM = string.ascii_lowercase + string.digits
WORDS = tuple(
    [
        "correct",
        "horse",
        "battery",
        "staple",
        "orange",
        "river",
        "violet",
        "marble",
        "canyon",
        "lantern",
        "pepper",
        "thunder",
        "willow",
        "copper",
        "meadow",
        "falcon",
        "harbor",
        "velvet",
        "quartz",
        "saddle",
    ]
)


@dataclass(frozen=True, slots=True)
class SecretCase:
    kind: str
    language: str  # en, zh or mixed
    text: str
    secret: str


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, n: int) -> str:
    """Random letters and digits with at least two of each case and two digits."""
    while True:
        value = _pick(rng, ALNUM, n)
        if (
            sum(c.isdigit() for c in value) >= 2
            and sum(c.isupper() for c in value) >= 2
            and sum(c.islower() for c in value) >= 2
        ):
            return value


def _password(rng: random.Random) -> str:
    return _mixed(rng, 6) + rng.choice("!#%&*?@") + _pick(rng, string.digits, 3)


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + _pick(rng, string.digits, length - len(prefix) - 1)
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def _grouped(digits: str, sep: str) -> str:
    return sep.join(digits[i : i + 4] for i in range(0, len(digits), 4))


def _iban(rng: random.Random) -> str:
    country, bban = rng.choice(
        [
            ("DE", _pick(rng, string.digits, 18)),
            ("GB", "WEST" + _pick(rng, string.digits, 14)),
            ("FR", _pick(rng, string.digits, 23)),
            ("NL", "ABNA" + _pick(rng, string.digits, 10)),
        ]
    )
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(numeric) % 97
    return _grouped(f"{country}{check:02d}{bban}", " ")


def _jwt(rng: random.Random) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": _pick(rng, string.digits, 8), "iat": rng.randrange(10**9, 2 * 10**9)})
    return f"{header}.{payload}.{_pick(rng, B64URL, 43)}"


def _pem(kind: str, rng: random.Random) -> tuple[str, str]:
    body = _pick(rng, B64, 64)
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----", body


# kind -> a generator of (phrase naming the secret in English, in Chinese, the secret)
Phrase = tuple[str, str, str]
_KINDS: dict[str, Callable[[random.Random], Phrase]] = {}


def _kind(name: str) -> Callable[[Callable[[random.Random], Phrase]], None]:
    def register(fn: Callable[[random.Random], Phrase]) -> None:
        _KINDS[name] = fn

    return register


def _token(prefix_en: str, prefix_zh: str, make: Callable[[random.Random], str]) -> Any:
    def fn(rng: random.Random) -> Phrase:
        s = make(rng)
        return f"{prefix_en} {s}", f"{prefix_zh} {s}", s

    return fn


_TOKENS: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "aws_access_key_id": ("my AWS access key id is", "AWS 访问密钥 ID 是",
                          lambda r: "AKIA" + _pick(r, string.ascii_uppercase + "234567", 16)),
    "github_classic": ("deploy with", "部署用", lambda r: "ghp_" + _pick(r, ALNUM, 36)),
    "github_oauth": ("the oauth app uses", "OAuth 应用用", lambda r: "gho_" + _pick(r, ALNUM, 36)),
    "github_fine_grained": ("CI uses", "CI 用的是", lambda r: "github_pat_11" + _pick(
        r, string.ascii_uppercase + string.digits, 20) + "_" + _pick(r, ALNUM, 59)),
    "gitlab": ("the runner has", "runner 配置了", lambda r: "glpat-" + _pick(r, B64URL, 20)),
    "stripe_live": ("charge with", "扣款用", lambda r: "sk_live_" + _pick(r, ALNUM, 24)),
    "stripe_restricted": ("reports read", "报表使用", lambda r: "rk_live_" + _pick(r, ALNUM, 24)),
    "twilio_account_sid": ("our Twilio account", "Twilio 账户", lambda r: "AC" + _pick(r, HEX, 32)),
    "twilio_api_key": ("the Twilio API key", "Twilio 接口", lambda r: "SK" + _pick(r, HEX, 32)),
    "slack_bot": ("the slack bot runs as", "Slack 机器人用", lambda r: "xoxb-" + _pick(
        r, string.digits, 11) + "-" + _pick(r, string.digits, 12) + "-" + _pick(r, ALNUM, 24)),
    "slack_user": ("my slack user token", "我的 Slack 用户令牌", lambda r: "xoxp-" + _pick(
        r, string.digits, 11) + "-" + _pick(r, string.digits, 12) + "-" + _pick(r, HEX, 32)),
    "slack_webhook": ("post alerts to", "告警发到", lambda r: "https://hooks.slack.com/services/T"
                      + _pick(r, string.ascii_uppercase + string.digits, 8) + "/B"
                      + _pick(r, string.ascii_uppercase + string.digits, 10) + "/"
                      + _pick(r, ALNUM, 24)),
    "mailgun": ("mailgun", "Mailgun 的", lambda r: "key-" + _pick(r, LOWER_ALNUM, 32)),
    "pypi": ("upload with", "上传用", lambda r: "pypi-AgEIcHlwaS5vcmc" + _pick(r, B64URL, 80)),
    "telegram_bot": ("the telegram bot", "电报机器人", lambda r: str(r.randrange(10**8, 10**10))
                     + ":AA" + _pick(r, B64URL, 33)),
    "azure_storage_key": ("connect with AccountName=acme;AccountKey=", "连接串 AccountKey=",
                          lambda r: _pick(r, B64, 86) + "=="),
    "azure_sas": ("the blob url is https://acme.blob.core.windows.net/c/f?sv=2022-11-02&sig=",
                  "下载链接 https://acme.blob.core.windows.net/c/f?sp=r&sig=",
                  lambda r: _pick(r, ALNUM, 40) + "%3D"),
    "jwt": ("session jwt", "会话 JWT", _jwt),
    "openai": ("my OpenAI key", "OpenAI 的 key", lambda r: "sk-proj-" + _pick(r, B64URL, 48)),
    "anthropic": ("anthropic", "Anthropic 用", lambda r: "sk-ant-api03-" + _pick(r, B64URL, 80)),
    "google_api": ("maps use", "地图用", lambda r: "AIza" + _pick(r, B64URL, 35)),
    "huggingface": ("HF hub", "HF 用", lambda r: "hf_" + _pick(r, ALNUM, 34)),
    "sendgrid": ("sendgrid", "SendGrid", lambda r: "SG." + _pick(r, B64URL, 22) + "."
                 + _pick(r, B64URL, 43)),
    "npm": ("npm publish with", "npm 发布用", lambda r: "npm_" + _pick(r, ALNUM, 36)),
    "square": ("square", "Square 的", lambda r: "sq0csp-" + _pick(r, B64URL, 43)),
    "mailchimp": ("mailchimp", "Mailchimp", lambda r: _pick(r, HEX, 32) + "-us" + str(
        r.randrange(1, 21))),
    "discord_bot": ("discord bot", "Discord 机器人", lambda r: r.choice("MNO") + _pick(
        r, ALNUM, 23) + "." + _pick(r, ALNUM, 6) + "." + _pick(r, B64URL, 27)),
    "bearer": ("curl -H 'Authorization: Bearer", "请求头 Authorization: Bearer",
               lambda r: _pick(r, B64URL, 40)),
    "api_key_labelled": ("the api key is", "API 密钥是", lambda r: _mixed(r, 24)),
    "token_labelled": ("token:", "令牌：", lambda r: _mixed(r, 28)),
    "high_entropy_bare": ("keep this for me", "帮我保存", lambda r: _mixed(r, 32)),
}  # fmt: skip
for _name, (_en, _zh, _make) in _TOKENS.items():
    _kind(_name)(_token(_en, _zh, _make))


@_kind("basic_auth_url")
def _basic_url(r: random.Random) -> Phrase:
    s = _password(r)
    en = f"db is postgres://app:{s}@db.internal:5432/prod"
    return en, f"数据库 mysql://root:{s}@10.0.0.5/app", s


@_kind("basic_auth_header")
def _basic_header(r: random.Random) -> Phrase:
    s = base64.b64encode(f"admin:{_password(r)}".encode()).decode()
    return f"Authorization: Basic {s}", f"请求头是 Authorization: Basic {s}", s


@_kind("cookie")
def _cookie(r: random.Random) -> Phrase:
    s = _pick(r, HEX, 32)
    return f"Cookie: sessionid={s}; theme=dark", f"我的 cookie 是 sessionid={s}", s


@_kind("rsa_private_key")
def _rsa(r: random.Random) -> Phrase:
    block, body = _pem("RSA ", r)
    return f"key:\n{block}", f"私钥如下\n{block}", body


@_kind("openssh_private_key")
def _openssh(r: random.Random) -> Phrase:
    block, body = _pem("OPENSSH ", r)
    return block, f"服务器私钥：\n{block}", body


@_kind("ec_private_key")
def _ec(r: random.Random) -> Phrase:
    block, body = _pem("EC ", r)
    return block, block, body


def _labelled(en: list[str], zh: list[str], make: Callable[[random.Random], str]) -> Any:
    def fn(rng: random.Random) -> Phrase:
        s = make(rng)
        return rng.choice(en).format(s=s), rng.choice(zh).format(s=s), s

    return fn


_LABELLED: dict[str, tuple[list[str], list[str], Callable[[random.Random], str]]] = {
    "password_is": (["my password is {s}", "the wifi password for the office is {s}",
                     "Password: {s}", "PASSWORD={s}"],
                    ["我的密码是{s}", "密码：{s}", "密码是：{s}", "wifi 密码为 {s}"], _password),
    "password_no_separator": (["password {s}", "my password {s} for the NAS"],
                              ["密码 {s}", "登录密码{s}"], _password),
    "pw": (["pw: {s}", "pw {s}", "PW={s}"], ["pw: {s}", "账号 admin pw {s}"], _password),
    "pass": (["pass: {s}", "user bob pass {s}"], ["pass：{s}", "用户 bob pass {s}"], _password),
    "passphrase": (["my password is {s}", "the passphrase is {s}"],
                   ["密码是 {s}", "口令为 {s}"],
                   lambda r: " ".join(r.sample(WORDS, 4))),
    "passcode": (["passcode {s}", "door passcode is {s}"], ["门禁 passcode {s}"],
                 lambda r: _pick(r, string.digits, 8)),
    "pin": (["my PIN is {s}", "PIN: {s}", "card pin {s}"], ["银行卡 PIN {s}", "pin 是 {s}"],
            lambda r: _pick(r, "123456789", 6)),
    "zh_payment_password": (["payment password: {s}"],
                            ["支付密码 {s}", "支付密码是{s}", "支付密码为：{s}"],
                            lambda r: _pick(r, "123456789", 6)),
    "zh_new_password": (["new password is {s}"],
                        ["新密码是{s}", "新密码设置为{s}", "新密码改成了 {s}"],
                        _password),
    "verification_code": (["your verification code is {s}", "OTP: {s}", "{s} is your login code"],
                          ["验证码：{s}", "您的验证码为 {s}，5分钟内有效", "{s}是您的验证码"],
                          lambda r: _pick(r, "123456789", 6)),
    "card_spaces": (["card {s} exp 12/29", "charge {s} please"],
                    ["卡号{s}，谢谢", "我的银行卡是 {s}"],
                    lambda r: _grouped(_luhn_complete("4", 16, r), " ")),
    "card_dashes": (["my visa is {s}"], ["信用卡 {s} 到期 2029"],
                    lambda r: _grouped(_luhn_complete("5", 16, r), "-")),
    "card_unionpay": (["unionpay {s}"], ["银行卡号 {s}，户名张三", "卡号是{s}"],
                      lambda r: _grouped(_luhn_complete("62", 19, r), " ")),
    "iban": (["wire it to IBAN {s} please", "my IBAN: {s}"], ["汇款到 IBAN {s}，谢谢"], _iban),
    "cookie_labelled": (["cookie session={s}"], ["cookie：sid={s}"], lambda r: _mixed(r, 24)),
}  # fmt: skip
for _name, (_en_t, _zh_t, _make_l) in _LABELLED.items():
    _kind(_name)(_labelled(_en_t, _zh_t, _make_l))


_SENTENCES = {
    "en": ["Here you go: {p}. Thanks!", "{p}", "Note to self, {p} (don't share)"],
    "zh": ["好的，{p}，请记住。", "{p}", "帮我记一下：{p}"],
    "mixed": ["帮我保存一下 {p} for later", "FYI {p}，别告诉别人", "记住 this one: {p}"],
}


def secret_corpus(*, per_kind: int = 7, seed: int = 11) -> list[SecretCase]:
    """``per_kind`` secrets of every kind, languages in turn; same seed, same corpus."""
    rng = random.Random(seed)
    cases: list[SecretCase] = []
    for kind, make in _KINDS.items():
        for i in range(per_kind):
            language = ("en", "zh", "mixed")[i % 3]
            en, zh, secret = make(rng)
            phrase = zh if language == "zh" else en
            # A key block stands alone.
            template = "{p}" if "\n" in phrase else rng.choice(_SENTENCES[language])
            cases.append(SecretCase(kind, language, template.format(p=phrase), secret))
    return cases


def kinds() -> list[str]:
    return list(_KINDS)


def leaked(secret: str, blob: bytes) -> bool:
    """Whether ``blob`` holds the secret's bytes with no letter or digit either side (a code
    inside a longer number, such as a stream id, is not a leak)."""
    raw = secret.encode()
    start = blob.find(raw)
    while start >= 0:
        end = start + len(raw)
        before = blob[start - 1 : start] if start else b""
        after = blob[end : end + 1]
        if not (before.isalnum() and before.isascii()) and not (
            after.isalnum() and after.isascii()
        ):
            return True
        start = blob.find(raw, start + 1)
    return False


def found_in(blob: bytes, cases: Iterable[SecretCase]) -> list[SecretCase]:
    """The cases whose secret ``blob`` leaks (:func:`leaked`).

    A data directory runs to hundreds of megabytes, and one search per secret read it once
    per secret: one pass of an automaton over every secret finds which occur at all, and
    only those are checked for what stands either side."""
    cases = list(cases)
    needles = sorted({c.secret.encode() for c in cases if c.secret})
    present: set[bytes] = set()
    if needles and blob:
        scan = ahocorasick_rs.BytesAhoCorasick(needles)
        present = {needles[i] for i, _, _ in scan.find_matches_as_indexes(blob, overlapping=True)}
    return [c for c in cases
            if (c.secret.encode() in present or not c.secret) and leaked(c.secret, blob)]


def locomo_turns(path: Path) -> Iterator[str]:
    """Every dialogue turn's text in a LoCoMo JSON file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for sample in data:
        conversation = sample.get("conversation", {})
        for key, turns in conversation.items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    if isinstance(turn, dict) and turn.get("text"):
                        yield str(turn["text"])


def order_ids(n: int = 1000, seed: int = 11) -> list[str]:
    """Random order ids of the shapes shops issue: digit runs of 6-18, a letter prefix and
    digits, a date then a serial, dash-joined groups. Some pass an id's checksum by chance."""
    rng = random.Random(seed)

    def digits(k: int) -> str:
        return _pick(rng, "0123456789", k)

    out = []
    for _ in range(n):
        shape = rng.randrange(4)
        if shape == 0:
            out.append(digits(rng.randint(6, 18)))
        elif shape == 1:
            prefix = _pick(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", rng.randint(1, 3))
            out.append(prefix + digits(rng.randint(6, 10)))
        elif shape == 2:
            day = f"{rng.randint(2015, 2026)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
            out.append(day + digits(rng.randint(3, 6)))
        else:
            out.append("-".join(digits(rng.randint(3, 5)) for _ in range(rng.randint(2, 4))))
    return out


def run_secret_bench(*, per_kind: int = 7, seed: int = 11, locomo: Path | None) -> dict[str, Any]:
    """Redaction alone: secrets left per kind, and the share of benign turns changed."""
    cases = secret_corpus(per_kind=per_kind, seed=seed)
    missed = [c for c in cases if c.secret in redact(c.text).text]
    out: dict[str, Any] = {
        "secrets": len(cases),
        "kinds": len(kinds()),
        "missed": len(missed),
        "missed_kinds": sorted({c.kind for c in missed}),
    }
    # Named as orders they must stay; bare, with no word to say what they are, a few that
    # pass a card's or an id's checks go (reported, not a target).
    orders = order_ids(seed=seed)
    out["order_ids"] = {
        "ids": len(orders),
        "redacted_named": sum(bool(redact(f"your order {o} has shipped").kinds) for o in orders),
        "redacted_bare": sum(bool(redact(o).kinds) for o in orders),
    }
    if locomo is not None:
        turns = list(locomo_turns(locomo))
        changed = [t for t in turns if redact(t).kinds]
        out |= {
            "benign_turns": len(turns),
            "benign_redacted": len(changed),
            "false_positive_rate": round(len(changed) / max(1, len(turns)), 5),
            "false_positive_examples": [redact(t).text for t in changed[:10]],
        }
    return out
