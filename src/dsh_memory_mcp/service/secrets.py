"""Credentials in text: `find_secret(text)` names the first credential-shaped thing it sees, or None.

The store is plain JSONL that every IDE and agent on the machine reads, so `memory_save` refuses
content that carries a credential (`CONTENT_SECRET`); `DSH_MEMORY_ALLOW_SECRETS=1` turns it off.

Two kinds of rule, both tuned for precision (a false refusal costs the user a memory, a miss leaks
a secret — the test corpus in `tests/test_secrets.py` measures both):

* **shapes** that are secrets by themselves: PEM private keys, provider tokens with a fixed prefix
  (`sk-…`, `AKIA…`, `ghp_…`, `github_pat_…`, `xox…`, `glpat-…`, `AIza…`, Stripe, npm, PyPI,
  Hugging Face, SendGrid, DigitalOcean, Telegram bots, Slack webhooks), JWTs, `Bearer` tokens, and
  URLs/connection strings with a password (`postgres://u:pw@host`);
* **assignments**: a credential key (`password`, `token`, `api_key`, `secret`, `密码`, …) followed
  by `=`/`:`/`是` and a value that is not a placeholder (`<…>`, `${…}`, `***`), an environment or
  code reference (`os.environ[…]`, `$VAR`, `self.password`), a plain word (`required`, `none`),
  or — for token-like keys — a number (``max_tokens=4096``).

Hashes, commit ids, UUIDs, base64 of text and public keys have none of these shapes and are not
flagged. Pure standard library; no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SecretFinding", "find_secret"]


@dataclass(frozen=True)
class SecretFinding:
    """What was found (a short English label) and where; never the value itself."""

    kind: str
    start: int


def _mixed(token: str) -> bool:
    """Random-looking: has a digit and a letter (vendor prefixes aside, real tokens always do)."""
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def _random_looking(part: str) -> bool:
    """A path segment that is really key material: long, mixed case and digits (base64-ish)."""
    return len(part) >= 12 and _mixed(part) and part.lower() != part and part.upper() != part


_B = r"(?<![A-Za-z0-9_\-])"  # token start: not inside a longer word

_SHAPES: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    # (label, pattern, the matched token must look random)
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), False),
    ("PuTTY private key", re.compile(r"PuTTY-User-Key-File-\d+:"), False),
    ("Anthropic/OpenAI API key", re.compile(_B + r"sk-(?:[A-Za-z0-9]+-){0,3}[A-Za-z0-9_\-]{20,}"), True),
    (
        "AWS access key id",
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA)[A-Z0-9]{16}(?![A-Z0-9])"),
        True,
    ),
    ("GitHub token", re.compile(_B + r"gh[pousr]_[A-Za-z0-9]{30,}"), True),
    ("GitHub fine-grained token", re.compile(_B + r"github_pat_[A-Za-z0-9_]{22,}"), True),
    ("GitLab token", re.compile(_B + r"gl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_\-]{20,}"), True),
    ("Slack token", re.compile(_B + r"xox[abposre]-(?:[A-Za-z0-9]+-){1,4}[A-Za-z0-9]+"), True),
    ("Slack webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]{20,}"), False),
    ("Google API key", re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}"), False),
    ("Stripe key", re.compile(_B + r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}"), True),
    ("npm token", re.compile(_B + r"npm_[A-Za-z0-9]{36}"), True),
    ("PyPI token", re.compile(_B + r"pypi-AgE[A-Za-z0-9_\-]{50,}"), False),
    ("Hugging Face token", re.compile(_B + r"hf_[A-Za-z0-9]{30,}"), True),
    ("SendGrid key", re.compile(_B + r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{30,}"), False),
    ("DigitalOcean token", re.compile(_B + r"do[opr]_v1_[a-f0-9]{64}"), False),
    ("Telegram bot token", re.compile(r"(?<!\d)\d{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])"), False),
    ("JSON Web Token", re.compile(_B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), False),
    ("bearer token", re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/\-]{20,}=*)"), True),
    ("basic auth header", re.compile(r"\bAuthorization:\s*Basic\s+[A-Za-z0-9+/]{12,}={0,2}"), False),
)

# scheme://user:password@host — the password group is checked against placeholders.
_URL_PASSWORD = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s:/@]*:([^\s@/]{3,})@[^\s/]+")
# Azure/ADO.NET style connection strings: Password=…; AccountKey=…; SharedAccessKey=…
_CONN_FIELD = re.compile(r"(?i)\b(?:password|pwd|accountkey|sharedaccesskey)\s*=\s*([^;\s\"'=]{4,}=*)")

_KEY = (
    r"(?:pass(?:word|wd|phrase)?|pwd|secret(?:[_\- ]?key)?|client[_\-]?secret|api[_\-]?key|apikey|"
    r"access[_\-]?(?:key|token)|auth[_\-]?token|refresh[_\-]?token|private[_\-]?key|"
    r"(?:bot|bearer|session|oauth|personal)[_\-]?token|token|credentials?)"
)
# Printable ASCII but quotes, backtick, comma and semicolon (explicit ranges: under IGNORECASE a
# negated non-ASCII range would also exclude K and I, which case-fold to the Kelvin sign and ı).
_ASSIGN = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_\-])*(" + _KEY + r")\b\s*[\"']?\s*(?:=|:|：|=>)\s*"
    r"(?P<q>[\"'`]?)(?P<value>[!#-&(-+\--:<-_a-~]{1,200})"
)
_ASSIGN_ZH = re.compile(
    r"(密码|口令|密钥|令牌|私钥|秘钥)\s*(?:是|为|[:：=])\s*[\"'“「]?(?P<value>[!#-&(-+\--:<-_a-~]{4,200})"
)

_WORDS = frozenset(
    [
        "true",
        "false",
        "null",
        "none",
        "nil",
        "undefined",
        "required",
        "optional",
        "empty",
        "yes",
        "no",
        "string",
        "str",
        "int",
        "integer",
        "bool",
        "boolean",
        "number",
        "hidden",
        "masked",
        "redacted",
        "secret",
        "password",
        "token",
        "value",
        "example",
        "sample",
        "changeme",
        "here",
        "your",
        "yours",
        "same",
        "env",
        "environment",
        "variable",
        "default",
        "unset",
        "set",
        "see",
        "below",
        "above",
        "placeholder",
        "dummy",
        "test",
        "na",
        "n/a",
        "tbd",
        "todo",
    ]
)
_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>?|\$\{[^}]*\}?|\$\(?[A-Za-z_][A-Za-z0-9_]*\)?|%[sd]|%\([a-z_]+\)s|\{\{?[^}]*\}?\}?|\[[^\]]*\]?|"
    r"[*xX•.#?_\-]{2,}|\*+[^*]{0,4}\*+)$"
)
_CODE_REF = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*(?:\([^()]*\)?|\[[^\]]*\]?)?$|"  # self.pw, os.environ[
    r"^[A-Za-z_][A-Za-z0-9_]*\((?:[^()]*\))?$|"  # get_password() (the value stops at a quote: "f(")
    r"^(?:process\.env|os\.environ|env|ENV)\b"
)


_PATH_OR_URL = re.compile(r"^(?:~|\.{1,2})?/[\w.\-/]*$|^[A-Za-z]:\\|^[a-z][a-z0-9+.\-]*://[^\s@]*$")


def _placeholder(value: str) -> bool:
    """A value that stands for a secret instead of being one: `<…>`, `${…}`, `$VAR`, a path, code."""
    value = value.rstrip("\"'`,;")
    if _PATH_OR_URL.match(value) and not any(_random_looking(part) for part in re.split(r"[/\\]", value)):
        return True
    bare = value.strip("\"'`()[]{}<>.,;=")
    if not bare or bare.lower() in _WORDS or _PLACEHOLDER.match(value) or _PLACEHOLDER.match(bare):
        return True
    if _CODE_REF.match(value):
        return True
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", bare) and "_" in bare)  # an env var's name: DB_PASSWORD


def _assignment_is_secret(key: str, value: str) -> bool:
    if _placeholder(value):
        return False
    key = key.lower().replace("-", "_").replace(" ", "_")
    if key.startswith(("pass", "pwd")) or key in ("secret", "credential", "credentials"):
        # Passwords may be short and plain; a bare lowercase word of prose is not one ("password: reset").
        if len(value) < 4:
            return False
        if value.isalpha() and value.islower() and len(value) < 12:
            return False
        return not value.isdigit() or len(value) >= 4
    # token / key like: a random-looking value, not a count (max_tokens=4096) nor a word.
    if value.isdigit() or len(value) < 8:
        return False
    return _mixed(value) or len(value) >= 20


def find_secret(text: str) -> SecretFinding | None:
    """The first credential in `text`, or None. Linear in the text (a few regex passes)."""
    for label, pattern, must_look_random in _SHAPES:
        for match in pattern.finditer(text):
            token = match.group(match.lastindex or 0)
            if must_look_random and not _mixed(token):
                continue
            return SecretFinding(label, match.start())
    for match in _URL_PASSWORD.finditer(text):
        if not _placeholder(match.group(1)) and match.group(1).lower() not in ("pass", "pw"):
            return SecretFinding("URL with a password", match.start())
    for match in _CONN_FIELD.finditer(text):
        if not _placeholder(match.group(1)) and len(match.group(1)) >= 4:
            return SecretFinding("connection string password", match.start())
    for match in _ASSIGN.finditer(text):
        if _assignment_is_secret(match.group(1), match.group("value")):
            return SecretFinding(f"{match.group(1).lower()} value", match.start())
    for match in _ASSIGN_ZH.finditer(text):
        value = match.group("value")
        if not _placeholder(value) and not (value.isalpha() and value.islower() and len(value) < 12):
            return SecretFinding(f"{match.group(1)} value", match.start())
    return None
