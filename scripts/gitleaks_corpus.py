#!/usr/bin/env python3
"""Extract gitleaks' own rule samples into an external secrets corpus (kept outside git).

gitleaks' rule definitions (cmd/generate/config/rules/*.go) carry the true-positive and
false-positive samples each rule is validated with. This project did not write them, so
they measure redaction on secrets it was never tuned on. The script reads a checkout, or a
bare git directory (the search tool's mirror), and writes JSON lines; nothing of theirs is
committed here.

    .venv/bin/python scripts/gitleaks_corpus.py GITLEAKS [--out ~/.cache/sleepmem/gitleaks.jsonl]
    .venv/bin/python scripts/gitleaks_corpus.py GITLEAKS \
        --synthetic tests/fixtures/secrets_synthetic.jsonl

``--synthetic`` keeps only the samples generated here from the rules' regexes (none of
gitleaks' literal strings): the small committed set the test suite runs without a network.

Each line: {"rule", "family", "split", "label", "text", "secret"}. ``label`` is "tp" or "fp";
``secret`` is the generated secret inside ``text`` when the sample was made from a rule's
regex (``secrets.NewSecret(...)``, expanded here with rstr), else null. ``split`` holds out
a third of the providers by a hash of their name ("heldout"), for checking generalisation.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

RULES = "cmd/generate/config/rules"
DEFAULT_OUT = Path.home() / ".cache" / "sleepmem" / "gitleaks.jsonl"

# gitleaks' utils/patterns.go: the character classes its samples are generated from.
_HELPERS = {
    "Numeric": "[0-9]{%s}",
    "Hex": "[a-f0-9]{%s}",
    "AlphaNumeric": "[a-z0-9]{%s}",
    "AlphaNumericExtendedShort": "[a-z0-9_-]{%s}",
    "AlphaNumericExtended": r"[a-z0-9=_\-]{%s}",
    "AlphaNumericExtendedLong": r"[a-z0-9/=_+\-]{%s}",
}
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_GO_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|`[^`]*`')
_FUNC = re.compile(r"^func \w+\(\) \*config\.Rule \{$", re.MULTILINE)
_RULE_ID = re.compile(r'RuleID:\s*"([^"]+)"')
_SAMPLES = re.compile(r"GenerateSampleSecrets?\(")
_LIST = re.compile(r"\[\]string\{")


def _go_literal(token: str) -> str:
    if token.startswith("`"):
        return token[1:-1]
    return str(json.loads(token.replace("\\'", "'")))


def _call_args(text: str, start: int, pair: str = "()") -> tuple[str, int]:
    """The text inside brackets whose opener is at ``start - 1``, and the index after them."""
    depth, i = 1, start
    while i < len(text) and depth:
        if text[i] in '"`':
            m = _GO_STRING.match(text, i)
            if m:
                i = m.end()
                continue
        depth += {pair[0]: 1, pair[1]: -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1], i


def _regex_of(expr: str) -> str | None:
    expr = expr.strip()
    m = re.fullmatch(r"utils\.(\w+)\(\s*\"(\d+)\"\s*\)", expr)
    if m and m.group(1) in _HELPERS:
        return _HELPERS[m.group(1)] % m.group(2)
    if re.fullmatch(r"utils\.Hex8_4_4_4_12\(\)", expr):
        return _UUID
    if _GO_STRING.fullmatch(expr):
        return _go_literal(expr)
    return None


def _evaluate(expr: str, rng: random.Random) -> str | None:
    """A Go string expression of literals, ``+`` and ``secrets.NewSecret(regex)``."""
    import rstr  # the bench's own dev dependency: regex -> a matching string

    gen = rstr.Rstr(rng)
    out: list[str] = []
    i = 0
    expr = expr.strip()
    while i < len(expr):
        if expr[i] in " \t\n+":
            i += 1
            continue
        m = _GO_STRING.match(expr, i)
        if m:
            out.append(_go_literal(m.group(0)))
            i = m.end()
            continue
        if expr.startswith("secrets.NewSecret(", i):
            args, i = _call_args(expr, i + len("secrets.NewSecret("))
            regex = _regex_of(args)
            if regex is None:
                return None
            try:
                out.append(gen.xeger(regex.replace("(?i)", "")))
            except Exception:  # a construct sre cannot parse: skip this sample
                return None
            continue
        return None  # a variable or another call: not evaluable here
    return "".join(out)


def _split_args(args: str) -> list[str]:
    parts, depth, last, i = [], 0, 0, 0
    while i < len(args):
        m = _GO_STRING.match(args, i) if args[i] in '"`' else None
        if m:
            i = m.end()
            continue
        if args[i] in "([{":
            depth += 1
        elif args[i] in ")]}":
            depth -= 1
        elif args[i] == "," and depth == 0:
            parts.append(args[last:i])
            last = i + 1
        i += 1
    parts.append(args[last:])
    return parts


def family(rule: str) -> str:
    return rule.split("-")[0]


def split_of(fam: str) -> str:
    return "heldout" if int(hashlib.sha1(fam.encode()).hexdigest(), 16) % 3 == 0 else "seen"


def samples(source: str, rng: random.Random) -> Iterator[dict[str, object]]:
    starts = [m.start() for m in _FUNC.finditer(source)] + [len(source)]
    for a, b in itertools.pairwise(starts):
        body = source[a:b]
        rule_m = _RULE_ID.search(body)
        if rule_m is None:
            continue
        rule = rule_m.group(1)
        # Samples follow the rule definition; true positives before the "fps" assignment.
        tm = re.search(r"\btps\s*:?=", body)
        if tm is None:
            continue
        tail = body[tm.start() :]
        fp_at = len(tail)
        fm = re.search(r"\bfps\s*:?=", tail)
        if fm:
            fp_at = fm.start()
        regions = (("tp", tail[:fp_at]), ("fp", tail[fp_at:]))
        fam = family(rule)
        base = {"rule": rule, "family": fam, "split": split_of(fam)}
        for label, region in regions:
            for call in _SAMPLES.finditer(region):
                args, _end = _call_args(region, call.end())
                parts = _split_args(args)
                if len(parts) != 2 or not _GO_STRING.fullmatch(parts[0].strip()):
                    continue
                ident = _go_literal(parts[0].strip())
                secret = _evaluate(parts[1], rng)
                if secret:
                    text = f'{ident}_api_token = "{secret}"'  # GenerateSampleSecret's form
                    yield {**base, "label": label, "text": text, "secret": secret}
            # Literal samples: the elements of every []string{...} in the region, each a
            # concatenation of literals and generated secrets.
            for lit in _LIST.finditer(region):
                elements, _end = _call_args(region, lit.end(), "{}")
                for element in _split_args(elements):
                    if not element.strip():
                        continue
                    literal = _evaluate(re.sub(r"//[^\n]*", "", element), rng)
                    if literal and len(literal) >= 8:
                        yield {**base, "label": label, "text": literal, "secret": None}


def _sources(root: Path) -> Iterator[tuple[str, str]]:
    if (root / RULES).is_dir():
        for path in sorted((root / RULES).glob("*.go")):
            if not path.name.endswith("_test.go"):
                yield path.name, path.read_text()
        return
    names = subprocess.run(
        ["git", "--git-dir", str(root), "ls-tree", "--name-only", f"HEAD:{RULES}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in names:
        if name.endswith(".go") and not name.endswith("_test.go"):
            blob = subprocess.run(
                ["git", "--git-dir", str(root), "show", f"HEAD:{RULES}/{name}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            yield name, blob


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("gitleaks", type=Path, help="a gitleaks checkout or git directory")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--synthetic", type=Path, help="write only regex-generated samples here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = [row for _name, src in _sources(args.gitleaks) for row in samples(src, rng)]
    if args.synthetic is not None:
        rows = [row for row in rows if row["secret"] is not None]
        args.out = args.synthetic
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tps = sum(r["label"] == "tp" for r in rows)
    print(f"{len(rows)} samples ({tps} true, {len(rows) - tps} false positives) -> {args.out}")


if __name__ == "__main__":
    main()
