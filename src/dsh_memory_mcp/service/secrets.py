"""Credentials in text: `find_secret(text)` names the first credential it sees, or None (docs/design.md
says what counts). Tuned on a labelled corpus (`tests/helpers/secret_corpus.py`) for precision (a false
refusal costs the user a memory) and recall (a miss leaks a secret). Rules: issuer formats (`_FORMATS`),
formats that need a word nearby (`_NEAR`), URLs and connection strings with a password, values of
credential keys (`_assignments`); each runs over the text as written and as read (`_views`). Linear
time: every pattern is a literal prefix with bounded repetitions, or is tried only at an anchor word.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SecretFinding:
    """What was found (a short English label) and where; never the value itself."""

    kind: str
    start: int


# -- what a value that only stands for a secret looks like ----------------------------------------

#: Values published in documentation and tutorials, not anybody's credential (the last one is the
#: Azure storage emulator's, Azurite's, account key).
_DOC_EXAMPLES = frozenset(
    """AKIAIOSFODNN7EXAMPLE AKIAI44QH8DHBEXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
    je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY sk_test_4eC39HqLyjWDarjtT1zdp7dc sk_test_BQokikJOvBiI2HlWgH4olfQ2
    sk_test_26PHem9AhJZvU623DfE1x4sd rk_test_4eC39HqLyjWDarjtT1zdp7dc ghp_16C7e42F292c6912E7710c838347Ae178B4a
    Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==""".split()  # noqa: SIM905
)
#: Words that make a vendor-shaped token a placeholder. Six letters or more count anywhere (a
#: random token holds one by chance about once in 10⁸); shorter ones only as a word of their own
#: (``xoxb-your-token``), since ``…iYOuR…`` turns up in random base64 often enough.
_FAKE_LONG = tuple(
    """example placeholder redacted change replace not-a-real notreal not_real dummy sample test-token
    insert""".split()  # noqa: SIM905 - a list of words reads better as prose
)
_FAKE_SHORT = re.compile(r"(?i)(?<![a-z])(?:your|fake|mock|here|xxx+)(?![a-z])")
_FAKE_MARKS = ("<", ">", "...", "…", "****")
_RUN = re.compile(r"(.)\1{5,}")


def _fake_words(value: str) -> bool:
    lowered = value.lower()
    if any(word in lowered for word in _FAKE_LONG) or any(mark in value for mark in _FAKE_MARKS):
        return True
    return _FAKE_SHORT.search(value) is not None or "not-a-" in lowered


def _fake(token: str) -> bool:
    """A documentation example or a placeholder in a vendor's shape (``sk-xxxx…``, ``…EXAMPLE``)."""
    if token in _DOC_EXAMPLES or _fake_words(token):
        return True
    return _RUN.search(token) is not None or len(set(token)) <= 5


def _mixed(token: str) -> bool:
    """Random-looking: has a digit and a letter (real tokens of 16+ random characters always do)."""
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def _cased(token: str) -> bool:
    """Has upper case, lower case and digits (base64 key material)."""
    return any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _bounded(text: str, start: int, end: int) -> bool:
    """The match is a whole token: no token character right before or after it."""
    return (start == 0 or text[start - 1] not in _TOKEN_CHARS) and (end == len(text) or text[end] not in _TOKEN_CHARS)


class _Folded:
    """A pattern of lower-case literals, run over ``text.lower()`` when lowering keeps every position
    (a case-insensitive scan of 20,000 characters costs ~6x more), else with IGNORECASE. Groups are
    read from the original text by their spans."""

    def __init__(self, pattern: str) -> None:
        self.plain = re.compile(pattern)
        self.folded = re.compile(pattern, re.IGNORECASE)

    def finditer(self, text: str, lowered: str | None) -> Iterator[re.Match[str]]:
        return self.plain.finditer(lowered) if lowered is not None else self.folded.finditer(text)


def _lowered(text: str) -> str | None:
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else None


# -- issuer formats ---------------------------------------------------------------------------------

_Check = Callable[[str], bool]
_ANY: _Check = lambda token: True  # noqa: E731


def _random_tail(prefix_len: int) -> _Check:
    return lambda token: _mixed(token[prefix_len:])


#: (label, needles, pattern, check of the matched token). A pattern runs only when one of its
#: needles is in the text (a substring test, much cheaper than a regex scan); every pattern has only
#: bounded repetitions; token boundaries are checked in Python (`_bounded`).
# fmt: off
_FORMATS: tuple[tuple[str, tuple[str, ...], re.Pattern[str], _Check], ...] = tuple(
    (label, needles, re.compile(pattern), check)
    for label, needles, pattern, check in (
        ("PuTTY private key", ("PuTTY-User-Key-File-",), r"PuTTY-User-Key-File-\d+: *[a-z0-9\-]+", _ANY),
        ("OpenAI-style API key", ("sk-",), r"sk-[A-Za-z0-9_\-]{20,300}", _random_tail(3)),
        ("AWS access key id", ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "APKA"), r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}", _random_tail(4)),
        ("GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{36,255}", _random_tail(4)),
        ("GitHub fine-grained token", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{50,255}", _random_tail(11)),
        ("GitLab token", ("gl",), r"gl(?:pat|dt|rt|ptt|cbt|soat|oas|ft|imt|agent|ffct|wt)-[A-Za-z0-9_\-]{20,300}", lambda t: _mixed(t.split("-", 1)[1])),
        ("Slack token", ("xox",), r"xox[abposre]-[A-Za-z0-9\-]{10,300}", _random_tail(5)),
        ("Slack token", ("xox",), r"xoxe(?:\.xox[bp])?-\d-[A-Za-z0-9\-]{20,300}", _ANY),
        ("Slack app-level token", ("xapp-",), r"xapp-\d-[A-Z0-9]{8,16}-\d{6,16}-[A-Za-z0-9]{32,80}", _ANY),
        ("Slack webhook", ("hooks.slack.com/",), r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{20,200}", _ANY),
        ("Stripe secret key", ("k_live_", "k_test_", "k_prod_"), r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,255}", lambda t: _mixed(t[8:])),
        ("Stripe webhook secret", ("whsec_",), r"whsec_[A-Za-z0-9+/=]{24,100}", _random_tail(6)),
        ("Google API key", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}", _ANY),
        ("Google OAuth client secret", ("GOCSPX-",), r"GOCSPX-[A-Za-z0-9_\-]{24,40}", _random_tail(7)),
        ("Google OAuth token", ("ya29.",), r"ya29\.[A-Za-z0-9_\-]{30,2000}", _random_tail(5)),
        ("Google OAuth refresh token", ("1//0",), r"1//0[A-Za-z0-9_\-]{40,600}", _random_tail(4)),
        ("Shopify token", ("shp",), r"shp(?:at|ca|pa|ss|ua)_[a-fA-F0-9]{32}", _ANY),
        ("Atlassian API token", ("TT3",), r"AT[AC]TT3[A-Za-z0-9_=\-]{100,400}", _ANY),
        ("Databricks token", ("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?", _ANY),
        ("Vault token", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.[A-Za-z0-9_\-]{24,400}", _random_tail(4)),
        ("Terraform Cloud token", (".atlasv1.",), r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=\-]{60,100}", _ANY),
        ("Square token", ("sq0",), r"sq0(?:atp|csp|idp)-[A-Za-z0-9_\-]{22,60}", _ANY),
        ("Square/Meta access token", ("EAA",), r"EAA[A-Za-z0-9_\-]{60,400}", _random_tail(3)),
        ("Linear API key", ("lin_",), r"lin_(?:api|oauth)_[A-Za-z0-9]{32,64}", _ANY),
        ("Mailchimp API key", ("-us",), r"[0-9a-f]{32}-us\d{1,2}", _ANY),
        ("Mailgun API key", ("key-",), r"key-[0-9a-f]{32}", _ANY),
        ("SendGrid API key", ("SG.",), r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,64}", _ANY),
        ("Discord bot token", (".",), r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}", _mixed),
        ("Discord webhook", ("discord",), r"discord(?:app)?\.com/api/webhooks/\d{15,22}/[A-Za-z0-9_\-]{40,100}", _ANY),
        ("Microsoft Teams webhook", ("webhook",), r"webhook\.office\.com/webhookb2/[A-Za-z0-9@/\-]{40,300}", _ANY),
        ("Microsoft Teams webhook", ("webhook",), r"outlook\.office(?:365)?\.com/webhook/[A-Za-z0-9@/\-]{40,300}", _ANY),
        ("Feishu/Lark bot webhook", ("/open-apis/bot/v2/hook/",), r"open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/[A-Za-z0-9\-]{20,64}", _ANY),
        ("WeCom bot webhook", ("qyapi.weixin.qq.com/cgi-bin/webhook/send?key=",), r"qyapi\.weixin\.qq\.com/cgi-bin/webhook/send\?key=[A-Za-z0-9\-]{20,64}", _ANY),
        ("DingTalk bot webhook", ("oapi.dingtalk.com/robot/send?access_token=",), r"oapi\.dingtalk\.com/robot/send\?access_token=[a-f0-9]{40,80}", _ANY),
        ("Telegram bot token", (":AA",), r"\d{8,10}:AA[A-Za-z0-9_\-]{33}", _ANY),
        ("npm token", ("npm_",), r"npm_[A-Za-z0-9]{36}", _random_tail(4)),
        ("PyPI token", ("pypi-AgE",), r"pypi-AgE[A-Za-z0-9_\-]{50,300}", _ANY),
        ("Hugging Face token", ("hf_",), r"hf_[A-Za-z0-9]{30,40}", _random_tail(3)),
        ("DigitalOcean token", ("_v1_",), r"do[opr]_v1_[a-f0-9]{64}", _ANY),
        ("Heroku API key", ("HRKU-",), r"HRKU-[A-Za-z0-9_\-]{40,80}", _random_tail(5)),
        ("Azure AD client secret", ("Q~",), r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", _ANY),
        ("Alibaba Cloud AccessKey", ("LTAI",), r"LTAI[A-Za-z0-9]{12,28}", _random_tail(4)),
        ("Tencent Cloud SecretId", ("AKID",), r"AKID[A-Za-z0-9]{32}", _random_tail(4)),
        ("Volcengine AccessKey", ("AKLT",), r"AKLT[A-Za-z0-9_\-]{40,60}", _random_tail(4)),
        ("Grafana token", ("gl",), r"glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}", _ANY),
        ("Grafana token", ("gl",), r"glc_[A-Za-z0-9+/]{32,400}={0,2}", _random_tail(4)),
        ("Sentry auth token", ("sntry",), r"sntry[us]_[A-Za-z0-9_=+/\-]{40,400}", _ANY),
        ("Doppler token", ("dp.",), r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,64}", _ANY),
        ("Postman API key", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", _ANY),
        ("Pulumi token", ("pul-",), r"pul-[a-f0-9]{40}", _ANY),
        ("Supabase token", ("sbp_",), r"sbp_[a-f0-9]{40}", _ANY),
        ("Groq API key", ("gsk_",), r"gsk_[A-Za-z0-9]{48,60}", _ANY),
        ("age secret key", ("AGE-SECRET-KEY-1",), r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", _ANY),
        ("JFrog API key", ("AKCp",), r"AKCp[A-Za-z0-9]{64,80}", _ANY),
        ("Dropbox token", ("sl.",), r"sl\.[A-Za-z0-9_\-]{130,300}", _random_tail(3)),
        ("Notion token", ("secret_", "ntn_"), r"(?:secret_[A-Za-z0-9]{43}|ntn_[0-9]{11}[A-Za-z0-9]{35})", _mixed),
        ("Airtable token", ("pat",), r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}", _ANY),
        ("Cloudflare origin CA key", ("v1.0-",), r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}", _ANY),
        ("Fly.io token", ("fo1_", "fm1", "fm2"), r"(?:fo1_[A-Za-z0-9_\-]{43}|fm[12][ar]?_[A-Za-z0-9+/=_\-]{100,2000})", _ANY),
        ("Replicate token", ("r8_",), r"r8_[A-Za-z0-9]{37}", _random_tail(3)),
        ("Perplexity API key", ("pplx-",), r"pplx-[A-Za-z0-9]{48}", _random_tail(5)),
        ("xAI API key", ("xai-",), r"xai-[A-Za-z0-9]{80}", _random_tail(4)),
        ("Tailscale key", ("tskey-",), r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,20}-[A-Za-z0-9]{16,64}", _ANY),
        ("Netlify token", ("nfp_",), r"nfp_[A-Za-z0-9]{36,40}", _random_tail(4)),
        ("Figma token", ("figd_",), r"figd_[A-Za-z0-9_\-]{40}", _random_tail(5)),
        ("Bitbucket app password", ("ATBB",), r"ATBB[A-Za-z0-9_=.\-]{32}", _random_tail(4)),
    )
)
# fmt: on


def _formats(text: str) -> SecretFinding | None:
    for label, needles, pattern, check in _FORMATS:
        if not any(needle in text for needle in needles):
            continue
        for match in pattern.finditer(text):
            token = match.group(0)
            if _bounded(text, match.start(), match.end()) and check(token) and not _fake(token):
                return SecretFinding(label, match.start())
    return None


# -- private keys and JWTs --------------------------------------------------------------------------

_PEM = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ ){0,3})PRIVATE KEY(?: BLOCK)?-----")
#: After the header: optional RFC 1421 headers (Proc-Type, DEK-Info), then base64 — in a file, or
#: inside a JSON string where the newlines are ``\n`` escapes.
_PEM_BODY = re.compile(
    r"(?:\\n|\\r|\s){1,8}(?:[A-Za-z\-]{2,20}: [^\n\\]{1,100}(?:\\n|\\r|\s){1,8}){0,4}[A-Za-z0-9+/=]{40}"
)
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{8,2000}\.eyJ[A-Za-z0-9_\-]{8,8000}\.([A-Za-z0-9_\-]{16,2000})")


def _private_key(text: str) -> SecretFinding | None:
    for match in _PEM.finditer(text):
        if _PEM_BODY.match(text, match.end()):
            return SecretFinding("private key", match.start())
    for match in _BARE_KEY.finditer(text) if "M" in text or "b3Blbn" in text else ():
        if match.group(0).startswith("b3Blbn") or _der_private_key(base64.b64decode(match.group(0))):
            return SecretFinding("private key", match.start())
    return None


#: A PEM body without its header: base64 of DER (a SEQUENCE, 'M…') or of OpenSSH's key magic
#: ("openssh-key-v1\0"). 44 characters: 33 bytes, the DER head `_der_private_key` reads.
_BARE_KEY = re.compile(r"(?<![A-Za-z0-9+/])(?:M[A-Za-z0-9+/]{43}|b3BlbnNzaC1rZXktdjE[A-Za-z0-9+/]{25})")
#: EncryptedPrivateKeyInfo's algorithm: PBES2, or a PKCS#12 password-based scheme.
_PBE_OIDS = (bytes.fromhex("06092a864886f70d01050d"), bytes.fromhex("060a2a864886f70d010c01"))


def _der_body(der: bytes) -> bytes:
    """What follows a DER SEQUENCE's tag and length (empty if `der` does not start with one)."""
    if len(der) < 2 or der[0] != 0x30:
        return b""
    size = 2 if der[1] < 0x80 else 2 + (der[1] & 0x7F) if der[1] in (0x81, 0x82, 0x83) else 0
    return der[size:] if size else b""


def _der_private_key(der: bytes) -> bool:
    """The head of a private key: PKCS#1 RSA/DSA `{0, INTEGER}`, PKCS#8 `{0, SEQUENCE}`, SEC1 EC
    `{1, OCTET STRING}`, PKCS#12 `{3, SEQUENCE}`, or an encrypted PKCS#8 `{{PBES2 …}}`. Public keys
    (`{{OID}, BIT STRING}`) and certificates (`{{[0] …}}`) have none of these heads."""
    body = _der_body(der)
    if body[:2] == b"\x02\x01" and len(body) > 3:
        return (body[2], body[3]) in ((0, 0x02), (0, 0x30), (1, 0x04), (3, 0x30))
    return _der_body(body).startswith(_PBE_OIDS)


def _decoded(segment: str) -> str:
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def _jwt(text: str) -> SecretFinding | None:
    for match in _JWT.finditer(text):
        if not _bounded(text, match.start(), match.end()):
            continue
        header, claims, _ = match.group(0).split(".", 2)
        try:
            head = json.loads(_decoded(header))
        except ValueError:
            continue
        if not isinstance(head, dict) or str(head.get("alg", "")).lower() == "none":
            continue
        payload = _decoded(claims)
        if '"John Doe"' in payload or '"1234567890"' in payload:  # jwt.io's sample and its variants
            continue
        return SecretFinding("JSON Web Token", match.start())
    return None


_HEADERS = (
    ("bearer token", re.compile(r"[Bb]earer\s+([A-Za-z0-9._~+/\-]{20,2000}=*)")),
    ("basic auth header", re.compile(r"Authorization:\s*Basic\s+([A-Za-z0-9+/]{12,400}={0,2})")),
)


def _headers(text: str) -> SecretFinding | None:
    for label, pattern in _HEADERS:
        if ("earer" if label == "bearer token" else "Basic") not in text:
            continue
        for match in pattern.finditer(text):
            token = match.group(1)
            if (_mixed(token) or label == "basic auth header") and not _fake(token):
                return SecretFinding(label, match.start())
    for match in _AUTH_BLOB.finditer(text) if "auth" in text else ():
        blob = match.group(1)
        try:  # strict: the blob must be UTF-8 text, not any bytes that happen to hold a colon
            user, colon, password = base64.b64decode(blob + "=" * (-len(blob) % 4)).decode().partition(":")
        except (binascii.Error, ValueError):
            continue
        if user.isprintable() and colon and password.isprintable() and _password_like(password, loose=False):
            return SecretFinding("registry auth (base64 user:password)", match.start())
    return None


#: Docker's ``"auth": "<base64 of user:password>"`` (``~/.docker/config.json``), ``.npmrc``'s ``_auth=``.
_AUTH_BLOB = re.compile(r"(?<![A-Za-z0-9])_?auth[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9+/]{8,400}={0,2})(?![A-Za-z0-9+/=])")


# -- formats that need a word nearby -----------------------------------------------------------------

#: (label, word groups, pattern, check): in the 80 characters before the token (or the 40 after
#: it), a word of every group must appear.
# fmt: off
_NEAR: tuple[tuple[str, tuple[tuple[str, ...], ...], re.Pattern[str], _Check], ...] = (
    ("AWS secret access key", (("aws", "secret", "akia", "asia", "密钥", "s3"),), re.compile(r"[A-Za-z0-9+/]{40}"), _cased),
    ("Twilio credential", (("twilio",),), re.compile(r"(?:SK)?[0-9a-f]{32}|[A-Za-z0-9]{32}"), _mixed),
    ("Azure storage key", (("azure", "storage", "accountkey", "account key"),), re.compile(r"[A-Za-z0-9+/]{86}=="), _cased),
    ("Vault token", (("vault",),), re.compile(r"s\.[A-Za-z0-9]{24}"), lambda t: _mixed(t[2:])),
    ("Heroku API key", (("heroku",), ("key", "token", "密钥", "令牌")), re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), _ANY),
)
# fmt: on
_B64_BODY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _near(text: str) -> SecretFinding | None:
    lowered = text.lower()
    for label, groups, pattern, check in _NEAR:
        if not all(any(word in lowered for word in words) for words in groups):
            continue
        for match in pattern.finditer(text):
            start, end = match.start(), match.end()
            before = text[start - 1] if start else " "
            after = text[end] if end < len(text) else " "
            # A whole token: not a slice of a longer base64 run, identifier or path.
            if before in _B64_BODY or before in "-_." or after in _B64_BODY or after in "=-_":
                continue
            token = match.group(0)
            if not check(token) or _fake(token):
                continue
            window = lowered[max(0, start - 80) : start] + " " + lowered[end : end + 40]
            if all(any(word in window for word in words) for words in groups):
                return SecretFinding(label, start)
    return None


# -- URLs and connection strings with a password ------------------------------------------------------

# scheme://user:password@host — the password may hold '@' (people do not percent-encode): the last
# '@' before the host ends it (bounded, so the backtracking is too).
_URL_PASSWORD = re.compile(
    r"([a-zA-Z][a-zA-Z0-9+.\-]{1,20})://([^\s:/@]{0,64}):([^\s/]{3,200})@([A-Za-z0-9.\-_]+|\[[0-9A-Fa-f:]+\])"
)
#: ``…;Password=…;`` — a field of a semicolon-separated connection string (ADO.NET, Azure, ODBC).
_CONN_FIELD = _Folded(r"(?:^|;)\s*(?:password|pwd|accountkey|sharedaccesskey)\s*=\s*([^;\s\"'=]{4,200}=*)")
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "0.0.0.0", "[::1]", "host.docker.internal", "example.com", "example.org")
#: Passwords that are words for "a password goes here".
_PASSWORD_WORDS = frozenset(["password", "passwd", "pass", "pwd", "pw", "secret", "xxx", "mypassword", "yourpassword"])
#: Defaults of local development setups (docker images, tutorials).
_DEFAULTS = frozenset(
    """root admin postgres guest test example changeme mysql redis user 123456 toor default dev demo
    rabbitmq mongo sa""".split()  # noqa: SIM905 - a list of words reads better as prose
)


def _urls(text: str) -> SecretFinding | None:
    for match in _URL_PASSWORD.finditer(text) if "://" in text else ():
        user, password, host = match.group(2), match.group(3), match.group(4).lower()
        if _placeholder(password) or password.lower() in _PASSWORD_WORDS:
            continue
        local = host.startswith(_LOCAL_HOSTS) or host.endswith((".local", ".localhost", ".example.com", ".test"))
        if local and (password.lower() in _DEFAULTS or password == user):
            continue
        return SecretFinding("URL with a password", match.start())
    for match in _CONN_FIELD.finditer(text, _lowered(text)) if "=" in text else ():
        value = text[match.start(1) : match.end(1)]
        if not _placeholder(value) and value.lower() not in _PASSWORD_WORDS:
            return SecretFinding("connection string password", match.start())
    return None


# -- values of credential keys -------------------------------------------------------------------------

_WORDS = frozenset(
    """true false null none nil undefined required optional empty yes no string str int integer bool
    boolean number hidden masked redacted secret password token value example sample changeme here
    your yours same env environment variable default unset set see below above placeholder dummy test
    na n/a tbd todo tba unknown encrypted hashed stored saved missing invalid wrong expired reset
    protected managed rotated configured generated provided given shown""".split()  # noqa: SIM905 - prose reads better
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


def _random_looking(part: str) -> bool:
    """A path segment that is really key material: long, mixed case and digits (base64-ish)."""
    return len(part) >= 12 and _mixed(part) and part.lower() != part and part.upper() != part


def _placeholder(value: str) -> bool:
    """A value that stands for a secret instead of being one: `<…>`, `${…}`, `$VAR`, a path, code."""
    value = value.rstrip("\"'`,;")
    if _PATH_OR_URL.match(value) and not any(_random_looking(part) for part in re.split(r"[/\\]", value)):
        return True
    bare = value.strip("\"'`()[]{}<>.,;=")
    if not bare or bare.lower() in _WORDS or _PLACEHOLDER.match(value) or _PLACEHOLDER.match(bare):
        return True
    if _CODE_REF.match(value) or bare.startswith("$") or _fake_words(bare):
        return True
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", bare) and "_" in bare)  # an env var's name: DB_PASSWORD


#: A credential key. Found by itself first; what follows it is then matched at that position only.
_KEY = _Folded(
    r"(pass(?:word|wd|phrase|code)?|pwd|pw|secret(?:[_\- ]?(?:access[_\- ]?)?key)?|client[_\- ]?secret|"
    r"app[_\- ]?secret|api[_\- ]?key|apikey|access[_\- ]?(?:key|token)|auth[_\- ]?token|refresh[_\- ]?token|"
    r"private[_\- ]?key|(?:bot|bearer|session|oauth|personal|id)[_\- ]?token|token|credentials?)(?![a-z])"
)
#: After the key: an optional closing quote/bracket, then a separator, then an optional opening quote.
_SEPARATOR = re.compile(
    r"[\"'\]]{0,2}"
    r"(?P<sep>\s*(?:=>|:=|==|=|:|：|是|为)\s*|\s+(?:is|was|are|is now|set to|changed to|reset to|to)\s+|"
    r"\s+(?:for|of)\s+[^\n=:：]{1,40}?\s+(?:is|was|[:：])\s+|\s+(?:for|of)\s+[^\n=:：]{1,40}?[:：]\s*|\s+)"
    r"(?P<q>[\"'`“「『]?)(?P<value>[!#-&(-+\--:<-_a-~]{1,200})"
)
_ZH_KEY = re.compile(r"(密码|口令|密钥|令牌|私钥|秘钥|授权码)")
_ZH_SEPARATOR = re.compile(
    r"\s*(?P<sep>是|为|[:：=]|改成了?|改为|设为|设置为|换成了?|\s)\s*[\"'“「『]?(?P<value>[!#-&(-+\--:<-_a-~]{4,200})"
)
_USE_AS = _Folded(
    r"(?<![a-z])use\s+[\"'`]?([!#-&(-+\--:<-_a-~]{4,100}?)[\"'`]?\s+as\s+(?:the\s+|my\s+|a\s+|our\s+|your\s+)?"
    r"(?:[a-z0-9\-]+\s+){0,2}(?:password|passphrase|pwd)\b"
)
_PAIR = _Folded(
    r"(?:credentials?|login|账号|帐号|用户名)(?:\s+(?:for|of)\s+[^\n:：]{1,40}?)?\s*[:：]\s*"
    r"([A-Za-z0-9_.@\-]{2,64})\s*/\s*([!#-&(-+\--:<-_a-~]{4,100})"
)
_SSHPASS = re.compile(r"sshpass\s+-p\s*[\"']?([^\s\"']{3,200})")


def _password_like(value: str, *, loose: bool) -> bool:
    """A password value. `loose`: separated only by whitespace or a prose word, so a plain word or a
    short number is prose, not a password."""
    value = value.rstrip(".,;:!?)]}>。,") if loose else value  # noqa: B005 - a set of trailing marks
    if len(value) < (6 if loose else 4) or _placeholder(value):
        return False
    if value.isalpha() and value.islower() and len(value) < 12:
        return False  # "password: reset"; a real password that is one plain word is rare
    if value.isdigit():
        return len(value) >= 6
    if loose and not any(c.isdigit() or c in "!@#$%^&*+=?~" for c in value):
        # Prose: a word follows ("password authentication", "secret redis-auth"), unless it is a
        # long run of random letters (a mail client's 16-letter authorisation code): few vowels.
        vowels = sum(c in "aeiouAEIOU" for c in value)
        return value.isalpha() and len(value) >= 16 and vowels / len(value) < 0.4
    return True


def _token_like(value: str, *, loose: bool) -> bool:
    """A token/key value: random-looking, not a count (``max_tokens=4096``) nor a word."""
    if _placeholder(value) or value.isdigit() or len(value) < (16 if loose else 8) or _fake(value):
        return False
    return _mixed(value) if loose else (_mixed(value) or len(value) >= 20)


def _key_is_bounded(text: str, start: int, key: str) -> bool:
    """The key starts a word, or continues an identifier (``DB_PASSWORD``, ``PGPASSWORD``, ``userPassword``)."""
    if start == 0:
        return True
    before = text[start - 1]
    if not before.isalnum():
        return True
    return key[:1].isupper() and (before.isupper() or (before.islower() and not key.isupper()))


def _assignments(text: str) -> SecretFinding | None:
    lowered = _lowered(text)
    for match in _KEY.finditer(text, lowered):
        key = text[match.start(1) : match.end(1)]
        if not _key_is_bounded(text, match.start(), key):
            continue
        tail = _SEPARATOR.match(text, match.end())
        if tail is None:
            continue
        sep = tail.group("sep").strip()
        loose = sep not in ("=", ":", "：", "=>", ":=", "==", "是", "为")
        norm = key.lower().replace("-", "_").replace(" ", "_")
        value = tail.group("value")
        if value.endswith("(") and text[tail.end() : tail.end() + 1] not in ('"', "'", "`"):
            value = value[:-1]  # "新密码:abc123(下次要改)": a parenthesis, not a call "f(" cut at a quote
        flag = text[max(0, match.start() - 1) : match.start()] == "-"  # --token VALUE, -password VALUE
        if loose and sep == "" and not tail.group("q") and not flag and not norm.startswith(("pass", "pwd", "pw")):
            continue  # "api key header", "secret sauce": only a password may follow its key bare
        if norm.startswith(("pass", "pwd")) or norm in ("pw", "secret", "credential", "credentials"):
            if norm in ("credential", "credentials") and loose:
                continue
            if _password_like(value, loose=loose and not flag):
                return SecretFinding(f"{key.lower()} value", match.start())
        elif _token_like(value, loose=loose and not flag):
            return SecretFinding(f"{key.lower()} value", match.start())
    for match in _ZH_KEY.finditer(text):
        tail = _ZH_SEPARATOR.match(text, match.end())
        if tail is None:
            continue
        value = tail.group("value")
        if value.endswith("(") and text[tail.end() : tail.end() + 1] not in ('"', "'", "`"):
            value = value[:-1]
        if _password_like(value, loose=tail.group("sep").isspace()):
            return SecretFinding(f"{match.group(1)} value", match.start())
    for pattern, label in _PROSE_AND_COMMANDS:
        matches = pattern.finditer(text, lowered) if isinstance(pattern, _Folded) else pattern.finditer(text)
        for match in matches:
            group = match.lastindex or 1
            if _password_like(text[match.start(group) : match.end(group)], loose=label == "password value"):
                return SecretFinding(label, match.start())
    return None


_FLAG_VALUE = r"[\"']?([^\s\"']{3,200})"
#: Prose shapes and command lines that carry a password somewhere other than after its key.
# fmt: off
_PROSE_AND_COMMANDS: tuple[tuple[re.Pattern[str] | _Folded, str], ...] = (
    (_USE_AS, "password value"),
    (_PAIR, "login and password"),
    (_SSHPASS, "sshpass password"),
    (re.compile(r"(?:docker|podman|nerdctl|helm)\s+(?:registry\s+)?login\b[^\n]{0,120}?\s(?:-p|--password)[\s=]+" + _FLAG_VALUE), "registry login password"),
    (re.compile(r"curl\b[^\n]{0,200}?\s(?:-u|--user)[\s=]+[\"']?[^\s:\"']{1,64}:([^\s\"']{3,200})"), "curl user:password"),
    (re.compile(r"redis-cli\b[^\n]{0,120}?\s(?:-a|--pass)\s+" + _FLAG_VALUE), "redis-cli password"),
    (re.compile(r"mysql(?:dump|admin|sh)?\b[^\n]{0,120}?\s-p[\"']?([^\s\"']{3,200})"), "mysql password"),
    (re.compile(r"(?:mongo|mongosh|mongodump)\b[^\n]{0,120}?\s(?:-p|--password)[\s=]+" + _FLAG_VALUE), "mongo password"),
    (re.compile(r"htpasswd\s+-\w*b\w*\s+\S{1,200}\s+\S{1,64}\s+" + _FLAG_VALUE), "htpasswd password"),
    (_Folded(r"key\s*=\s*[\"'][\w.:\-]{0,40}(?:password|passwd|pwd|secret|token|apikey|api_key)[\"']\s+value\s*=\s*[\"']([^\"']{4,200})"), "config password attribute"),
)
# fmt: on


_CHECKS: tuple[Callable[[str], SecretFinding | None], ...] = (
    _private_key, _formats, _jwt, _headers, _near, _urls, _assignments,
)  # fmt: skip


# -- disguises -----------------------------------------------------------------------------------------

#: Characters that render as nothing (soft hyphen, zero-width space/joiners, bidi marks, word joiner,
#: invisible operators, BOM): a token with one inside still is that token.
_INVISIBLE = dict.fromkeys(
    [0x00AD, 0x034F, 0x061C, 0x180E, 0xFEFF, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2070)]
)
#: A JSON/JavaScript escape (``ghp\u005f…``, ``https:\/\/…``).
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(/)")
#: A line break (and the next line's indentation) between two token characters.
_LINE_SPLIT = re.compile(r"(?<=[A-Za-z0-9_\-])\r?\n[ \t]{0,40}(?=[A-Za-z0-9_\-])")


def _unescaped(match: re.Match[str]) -> str:
    return match.group(2) or chr(int(match.group(1), 16))


def _views(text: str) -> Iterator[tuple[str, tuple[Callable[[str], SecretFinding | None], ...]]]:
    """The text as written, then as read: escapes decoded, invisible characters dropped, full-width
    and other compatibility forms folded (NFKC) — every check; then with the lines a token was
    broken over joined — the issuer formats only (joining lines makes prose run together)."""
    yield text, _CHECKS
    folded = unicodedata.normalize("NFKC", _ESCAPE.sub(_unescaped, text).translate(_INVISIBLE))
    if folded != text:
        yield folded, _CHECKS
    joined = _LINE_SPLIT.sub("", folded) if "\n" in folded else folded
    if joined != folded:
        yield joined, (_formats, _jwt)


def find_secret(text: str) -> SecretFinding | None:
    """The first credential in `text` (its `start` is in the view it was seen in), or None. Linear
    in the text (a few regex passes over at most three views of it)."""
    for view, checks in _views(text):
        for check in checks:
            finding = check(view)
            if finding is not None:
                return finding
    return None
