"""The credential detector (`service/secrets.py`) on a corpus: real-shaped secrets vs look-alikes.

Every secret is generated here from random bytes in the shape its issuer uses (never a real key),
inside the kind of sentence an agent might try to save. The look-alikes are things a memory often
holds that resemble secrets: commit ids, UUIDs, hashes, digests, base64 of text, public keys,
Chinese text with numbers, URLs without passwords, placeholders and code that *refers* to a secret.
The test prints precision and recall and requires both ≥ 0.95.

The larger measurement is on `tests/helpers/secret_corpus.py`, written from the vendors' published
token formats before the detector was tuned on it (`corpus()`), plus a held-out set (`holdout()`)
written after the first tuning and measured once before any further change.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import os
import random
import string
import uuid

import pytest

from dsh_memory_mcp.service.secrets import find_secret
from tests.helpers.secret_corpus import DOC_EXAMPLES, MISSING_TOOLS, Sample, corpus, disguised, holdout

rng = random.Random(20261201)
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"


def rand(alphabet: str, n: int) -> str:
    # At least one digit and one letter, as every issuer's random part has in practice.
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in out) == any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in out):
            return out


def b64(n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def hexs(n_bytes: int) -> str:
    return rng.randbytes(n_bytes).hex()


def pem(label: str) -> str:
    body = "\n".join(b64(48) for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def jwt() -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64url(
        json.dumps({"sub": str(rng.randint(1000, 99999)), "iat": rng.randint(1_600_000_000, 1_800_000_000)}).encode()
    )
    return f"{header}.{claims}.{b64url(rng.randbytes(32))}"


def password() -> str:
    return rand(ALNUM + "!#%&*+-_", 14)


def make_secrets() -> list[str]:
    return [
        f"OpenAI 的 API key 是 sk-{rand(ALNUM, 48)}",
        f"项目用的 key:sk-proj-{rand(B64URL, 64)}",
        f"Anthropic key sk-ant-api03-{rand(B64URL, 93)}AA",
        f"AWS access key id AKIA{rand(UPPER_DIGITS, 16)} 用于部署",
        f"临时凭据 ASIA{rand(UPPER_DIGITS, 16)}",
        f"aws_secret_access_key = {b64(30)}",
        f"GitHub token ghp_{rand(ALNUM, 36)}",
        f"OAuth app token gho_{rand(ALNUM, 36)}",
        f"细粒度 token github_pat_{rand(ALNUM, 22)}_{rand(ALNUM, 59)}",
        f"Slack bot: xoxb-{rng.randint(10**11, 10**12)}-{rng.randint(10**11, 10**12)}-{rand(ALNUM, 24)}",
        f"Slack user token xoxp-{rng.randint(10**11, 10**12)}-{rng.randint(10**11, 10**12)}-{rand(ALNUM, 32)}",
        f"告警发到 https://hooks.slack.com/services/T{rand(UPPER_DIGITS, 8)}/B{rand(UPPER_DIGITS, 10)}/{rand(ALNUM, 24)}",
        f"测试用户的会话 JWT:{jwt()}",
        f"部署私钥:\n{pem('RSA PRIVATE KEY')}",
        f"{pem('OPENSSH PRIVATE KEY')}",
        f"EC key\n{pem('EC PRIVATE KEY')}",
        f"{pem('PGP PRIVATE KEY BLOCK')}",
        f"生产库连接串 postgres://app:{password()}@db.internal:5432/app",
        f"mysql://root:{password()}@127.0.0.1:3306/shop",
        f"MONGO_URL=mongodb+srv://admin:{password()}@cluster0.{rand(ALNUM, 5).lower()}.mongodb.net/test",
        f"缓存 redis://:{password()}@cache:6379/0",
        f"amqp://guest:{password()}@mq:5672/",
        f"password={password()}",
        f"db:\n  user: app\n  password: {password()}",
        f"DB_PASSWORD={password()}",
        json.dumps({"name": "ci", "token": rand(ALNUM, 40)}),
        f'api_key = "{rand(ALNUM, 32)}"',
        f"client_secret: {rand(B64URL, 40)}",
        f"服务器 root 密码是 {password()}",
        f"数据库密码:{password()}",
        f"curl -H 'Authorization: Bearer {rand(B64URL, 48)}' https://api.example.com",
        "Authorization: Basic " + base64.b64encode(f"admin:{password()}".encode()).decode(),
        f"Maps key AIza{rand(B64URL, 35)}",
        f"Stripe sk_live_{rand(ALNUM, 24)}",
        f"GitLab glpat-{rand(B64URL, 20)}",
        f"发布用 npm_{rand(ALNUM, 36)}",
        f"PyPI 上传 token pypi-AgEIcHlwaS5vcmc{rand(B64URL, 70)}",
        f"HF_TOKEN 为 hf_{rand(ALNUM, 34)}",
        f"SendGrid SG.{rand(B64URL, 22)}.{rand(B64URL, 43)}",
        f"DigitalOcean dop_v1_{hexs(32)}",
        f"Telegram 机器人 {rng.randint(10**8, 10**9)}:AA{rand(B64URL, 33)}",
        "DefaultEndpointsProtocol=https;AccountName=logs;AccountKey=" + b64(64) + ";EndpointSuffix=core.windows.net",
        f"Server=sql01;Database=erp;User Id=sa;Password={password()};",
        f"Django SECRET_KEY = '{rand(ALNUM + '!@#%^&*(-_=+)', 50)}'",
        f"refresh_token: {rand(B64URL, 64)}",
        f"xoxa-2-{rand(ALNUM, 40)}",
    ]


SECRETS = make_secrets()


def make_look_alikes() -> list[str]:
    return [
        f"回归是在 commit {hexs(20)} 引入的",
        f"修复见 {hexs(4)[:7]},已合入 main",
        f"请求 id {uuid.UUID(bytes=rng.randbytes(16), version=4)} 超时",
        f"安装包 sha256: {hashlib.sha256(rng.randbytes(64)).hexdigest()}",
        f"镜像 python@sha256:{hashlib.sha256(rng.randbytes(64)).hexdigest()}",
        "npm integrity sha512-" + base64.b64encode(hashlib.sha512(rng.randbytes(64)).digest()).decode(),
        "配置的 base64 是 " + base64.b64encode("数据库连接池大小改成 20".encode()).decode(),
        "header value " + base64.b64encode(b"hello world, this is just text").decode(),
        "我们在 2024 年 3 月把 QPS 从 1200 提升到 4800,延迟 p99 35 ms",
        "工号 20231234 的同事负责发布,电话分机 8021",
        "仓库地址 https://github.com/example/dsh-memory-mcp",
        "克隆用 ssh://git@github.com/example/app.git",
        "本地数据库 postgres://localhost:5432/app",
        "连接串模板 postgres://app:${DB_PASSWORD}@db:5432/app",
        "password=${DB_PASSWORD} 由 CI 注入",
        "password: <your password>",
        "调用时 max_tokens=4096,temperature=0.2",
        "上下文 token 上限是 8192",
        "OpenAI API key 放在 1Password 的「OpenAI」条目里,运行时读环境变量 OPENAI_API_KEY",
        "The password policy requires at least 12 characters",
        "特征工程用 scikit-learn(sklearn)",
        f"-----BEGIN PUBLIC KEY-----\n{b64(48)}\n{b64(48)}\n-----END PUBLIC KEY-----",
        f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b64(24)} dev@laptop",
        f"-----BEGIN CERTIFICATE-----\n{b64(48)}\n-----END CERTIFICATE-----",
        "接口用 JWT 鉴权,token 放在 Authorization 头里",
        "token: 用环境变量 GITHUB_TOKEN 传入",
        "password = os.environ['DB_PASSWORD']",
        "self.password = password",
        "password=getpass.getpass()",
        "部署角色 arn:aws:iam::123456789012:role/deploy",
        "网关 fe80::1ff:fe23:4567:890a,MAC 00:1A:2B:3C:4D:5E",
        "版本号 v2.14.3-rc.1+build.5678",
        "AWS 凭据在 ~/.aws/credentials,profile 叫 prod",
        "credentials: ~/.aws/credentials",
        "主题色 #1E90FF,边框 #333",
        "task-runner-2024-config-reloaded-module 是模块名",
        "AKIA 开头的是 AWS access key id,别存进记忆",
        "ghp_ 前缀代表 GitHub personal access token",
        "eyJ 开头的字符串通常是 JWT",
        "password reset 邮件由 auth 服务发送",
        "refresh_token 有效期 30 天,access_token 1 小时",
        "图标 data:image/png;base64,iVBORw0KGgo" + b64(40),
        "示例请求头 Authorization: Bearer <token>",
        "token_url: https://auth.example.com/oauth/token",
        "密码长度至少 12 位,必须包含数字和字母",
        "密码:见 1Password 里的 prod-db 条目",
        "sha256sum 输出 " + hashlib.sha256(b"release").hexdigest() + "  dist.tar.gz",
        "secret: 存在 Vault 的 secret/data/app 路径下",
        "tokens: 12000(本月用量)",
        "session_token_ttl=3600",
    ]


LOOK_ALIKES = make_look_alikes()


def test_the_corpus_is_big_enough():
    assert len(SECRETS) >= 40 and len(LOOK_ALIKES) >= 40


def test_the_detector_finds_secrets_with_precision_and_recall_of_at_least_095(capsys):
    found = [text for text in SECRETS if find_secret(text) is not None]
    false_alarms = [text for text in LOOK_ALIKES if find_secret(text) is not None]
    tp, fp = len(found), len(false_alarms)
    fn = len(SECRETS) - tp
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn)
    with capsys.disabled():
        print(
            f"\nsecret detector: {len(SECRETS)} secrets, {len(LOOK_ALIKES)} look-alikes; "
            f"tp={tp} fp={fp} fn={fn} precision={precision:.3f} recall={recall:.3f}"
        )
    missed = [text[:60] for text in SECRETS if find_secret(text) is None]
    flagged = [(text[:60], find_secret(text)) for text in false_alarms]
    assert precision >= 0.95, flagged
    assert recall >= 0.95, missed


def test_fresh_random_corpora_are_classified_the_same_way():
    # 30 more draws of every shape: the rules must not depend on one lucky sample.
    missed, flagged = 0, 0
    for seed in range(30):
        rng.seed(seed)
        missed += sum(find_secret(text) is None for text in make_secrets())
        flagged += sum(find_secret(text) is not None for text in make_look_alikes())
    total = 30 * len(SECRETS)
    print(
        f"\n30 fresh corpora: {missed} of {total} secrets missed, {flagged} of {30 * len(LOOK_ALIKES)} look-alikes flagged"
    )
    assert missed <= 0.05 * total and flagged <= 0.05 * 30 * len(LOOK_ALIKES)


@pytest.mark.parametrize("text", ["", "普通的一句话", "x" * 100_000, "密码长度" * 20_000, "token " * 20_000])
def test_plain_and_huge_texts_have_no_finding(text):
    assert find_secret(text) is None


@pytest.mark.parametrize("text", ["password=" * 20_000, "a:" * 50_000 + "@", "eyJ" * 50_000, "-" * 100_000])
def test_hostile_texts_cause_no_catastrophic_backtracking(text):
    import time

    started = time.perf_counter()
    find_secret(text)
    assert time.perf_counter() - started < 3.0  # linear-ish: ~0.2 s for 180 KB here; 20k chars is the cap


#: 20,000 characters (the content limit) built to make a backtracking pattern explode: 11f31c0 took
#: 55 s on "a_"·10⁴ and 85 s on "a-"·10⁴ (nested quantifiers in its assignment rule). Here each
#: costs < 50 ms on the build machine (docs/performance.md); the bound below only
#: catches a catastrophe, it is not a speed target.
ADVERSARIAL = {
    "identifier parts": "a_" * 10_000,
    "dashed parts": "a-" * 10_000,
    "sk- then parts": "sk-" + "a-" * 9_998,
    "password for x": "password for x " * 1_333,
    "use x as": "use x as " * 2_222,
    "credentials pairs": "credentials: a / " * 1_176,
    "curl -u": "curl -u " * 2_500,
    "docker login": "docker login " * 1_538,
    "URL with many @": "x://a:" + "@" * 19_994,
    "PEM headers": "-----BEGIN PRIVATE KEY-----\n" + "Proc-Type: x\n" * 1_426,
    "JWT-like dots": "eyJaaaaaaaa." * 1_666,
    "base64 near aws": ("aws " + "A" * 40 + " ") * 444,
    "密码是": "密码是" * 6_666,
    "Azure Q~": "aaa1Q~" * 3_333,
    "\\u escapes": "\\u0041" * 3_333,
    "lone surrogate escapes": "\\ud83d" * 3_333,
    "zero-width spaces": "\u200b" * 20_000,
    "full-width letters": "ｇ" * 20_000,
    "split lines": ("ghp_\n  " + "a" * 10) * 1_176,
    "base64 DER heads": ("M" + "A" * 63 + "\n") * 307,
    "auth fields": '"auth":"QUFB" ' * 1_428,
}


@pytest.mark.parametrize("text", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_a_20000_character_adversarial_content_is_checked_without_backtracking_blowup(text):
    import time

    assert len(text) <= 20_000
    started = time.perf_counter()
    find_secret(text)
    assert time.perf_counter() - started < 2.0


# -- the vendor-format corpus ------------------------------------------------------------------------


def measure(samples: list[Sample]) -> tuple[float, float, list[Sample], list[Sample]]:
    missed = [s for s in samples if s.secret and find_secret(s.text) is None]
    flagged = [s for s in samples if not s.secret and find_secret(s.text) is not None]
    tp = sum(s.secret for s in samples) - len(missed)
    precision = tp / (tp + len(flagged)) if tp + len(flagged) else 0.0
    recall = tp / sum(s.secret for s in samples)
    return precision, recall, missed, flagged


def table(samples: list[Sample]) -> str:
    rows: dict[tuple[bool, str], list[int]] = collections.OrderedDict()
    for s in samples:
        row = rows.setdefault((s.secret, s.vendor), [0, 0])
        row[0] += 1
        row[1] += find_secret(s.text) is not None
    return "\n".join(
        f"  {'secret' if secret else 'benign'}  {vendor:<46} n={n:<3} {'caught' if secret else 'flagged'}={hits}"
        for (secret, vendor), (n, hits) in rows.items()
    )


def test_the_vendor_format_corpus_is_refused_with_precision_and_recall_of_at_least_099(capsys):
    samples = corpus()
    if os.environ.get("CI") == "true":
        assert MISSING_TOOLS == []  # the openssl/ssh-keygen keys are part of the corpus
    assert sum(s.secret for s in samples) >= 400 and sum(not s.secret for s in samples) >= 200
    precision, recall, missed, flagged = measure(samples)
    with capsys.disabled():
        print(f"\nvendor-format corpus: {len(samples)} texts, precision {precision:.3f}, recall {recall:.3f}")
        print(table(samples))
    # Measured: precision 1.000, recall 1.000 (438 secrets of 50 formats, 236 look-alikes). The
    # issue's bar is 0.97 / 0.95; 11f31c0 scored 0.941 / 0.696 on this corpus.
    assert precision >= 0.99, [(s.vendor, s.text[:80]) for s in flagged]
    assert recall >= 0.99, [(s.vendor, s.text[:80]) for s in missed]


def test_fresh_draws_of_every_vendor_format_are_caught_too():
    # Other random tokens in the same shapes: no rule may depend on one lucky sample.
    missed: collections.Counter[str] = collections.Counter()
    flagged: collections.Counter[str] = collections.Counter()
    for seed in range(1, 6):
        _, _, miss, flag = measure(corpus(seed=seed, draws=4))
        missed.update(s.vendor for s in miss)
        flagged.update(s.vendor for s in flag)
    assert sum(missed.values()) <= 2 and sum(flagged.values()) <= 2, (missed, flagged)


def test_the_held_out_set_is_refused_with_precision_and_recall_of_at_least_099(capsys):
    samples = holdout()
    precision, recall, missed, flagged = measure(samples)
    with capsys.disabled():
        print(f"\nheld-out set: {len(samples)} texts, precision {precision:.3f}, recall {recall:.3f}")
    # First measurement (the detector tuned on corpus() only): precision 0.911, recall 0.730 —
    # command-line passwords (docker login -p, curl -u, redis-cli -a, mysql -p), bot webhooks
    # (Teams, Feishu, WeCom), `pw`, `AppSecret 是 …`, XML value attributes and a Heroku app id
    # taken for a key. Those rules were then added; now 1.000 / 1.000 (11f31c0: 1.000 / 0.540).
    assert precision >= 0.99, [(s.vendor, s.text[:80]) for s in flagged]
    assert recall >= 0.99, [(s.vendor, s.text[:80]) for s in missed]


@pytest.mark.parametrize("text", DOC_EXAMPLES)
def test_documentation_example_keys_are_not_refused(text):
    assert find_secret(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "Stripe publishable key pk_live_" + "aB3dE5gH7jK9mN1pQ3sT5vX7",
        "本地开发库 mysql://root:root@localhost/test",
        "私钥文件以 -----BEGIN OPENSSH PRIVATE KEY----- 开头",
        "OPENAI_API_KEY=<your-api-key>",
        "api key 填 sk-... 就行",
        "SLACK_BOT_TOKEN=xoxb-your-bot-token-here",
        "JWT_SECRET=change_this_in_production",
        "the password must contain a digit and a symbol",
        "Redis 密码在 k8s secret redis-auth 里",
        "SSH password authentication is disabled; keys only",
    ],
)
def test_look_alikes_the_tester_and_the_corpus_named_are_not_refused(text):
    assert find_secret(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "Shopify shpat_" + "0123456789abcdef" * 2,
        "ATATT3xFfGF0" + "aB3dE5gH7jK9mN1p" * 10 + "=0A1B2C3D",
        "dapi" + "0123456789abcdef" * 2,
        "VAULT_TOKEN=hvs." + "aB3dE5gH7jK9mN1pQ3sT5vX7" * 4,
        "sq0atp-" + "aB3dE5gH7jK9mN1pQ3sT5v",
        "LINEAR_API_KEY=lin_api_" + "aB3dE5gH7jK9mN1pQ3sT" * 2,
        "TWILIO_AUTH_TOKEN=" + "0123456789abcdef" * 2,
        "0123456789abcdef0123456789abcdef-us14",
        "SLACK_APP_TOKEN=xapp-1-A0123ABCDEF-1234567890123-" + "0123456789abcdef" * 4,
        "STRIPE_WEBHOOK_SECRET=whsec_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI",
        "GOCSPX-" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9c",
        "PGPASSWORD=Xk9#mQ2!vL7 psql -h db",
        "the AWS secret key is " + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5oQ7+",
        "我的密码是Tr0ub4dor&3",
        "口令:q1w2e3r4!",
        "Discord 机器人 token MjUxMTYwMjgxODI4NjMzNTc3.KYfd0p.2jZcoROutF3C4EHocDxM_vp_6EeytoJ8USzJeD",
    ],
)
def test_the_formats_the_tester_found_missing_are_refused(text):
    assert find_secret(text) is not None


def test_a_finding_names_the_kind_but_never_holds_the_value():
    token = f"ghp_{rand(ALNUM, 36)}"
    finding = find_secret(f"token {token}")
    assert finding is not None and finding.kind == "GitHub token"
    assert token not in repr(finding)


# -- disguised secrets (issue 32) -----------------------------------------------------------------


def test_the_disguised_corpus_is_refused_with_precision_and_recall_of_at_least_099(capsys):
    # a6e4495 scored precision 1.000, recall 0.316 here (93 of 294 caught: only where a context
    # key caught the part before the disguise); full-width, Docker auths and bare PEM bodies: 0.
    samples = disguised()
    assert sum(s.secret for s in samples) >= 250 and sum(not s.secret for s in samples) >= 45
    precision, recall, missed, flagged = measure(samples)
    with capsys.disabled():
        print(f"\ndisguised set: {len(samples)} texts, precision {precision:.3f}, recall {recall:.3f}")
        print(table(samples))
    assert precision >= 0.99, [(s.vendor, s.text[:80]) for s in flagged]
    assert recall >= 0.99, [(s.vendor, s.text[:80]) for s in missed]


def test_fresh_draws_of_the_disguised_set_are_classified_the_same_way():
    missed = flagged = 0
    for seed in range(1, 4):
        _, _, miss, flag = measure(disguised(seed=seed, draws=2))
        missed, flagged = missed + len(miss), flagged + len(flag)
    assert missed <= 2 and flagged <= 1, (missed, flagged)


GH = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5"
DOCKER_AUTH = base64.b64encode(b"deploy:Xk9#mQ2!vL7w").decode()


@pytest.mark.parametrize(
    "text",
    [
        "token " + GH[:10] + "\u200b" + GH[10:],
        "Stripe sk_live_aB3dE5gH\u00adjK9mN1pQ3sT5vX7",
        "ｘｏｘｂ－１２３４５６７８９０１２－１２３４５６７８９０１２３－ａＢ３ｄＥ５ｇＨ７ｊＫ９ｍＮ１ｐＱ３ｓＴ５ｖＸ７",
        "发布用 " + GH[:12] + "\n    " + GH[12:],
        '{"ci": "ghp\\u005f' + GH[4:] + '"}',
        '{"t": "' + "".join(f"\\u{ord(c):04x}" for c in GH) + '"}',
        '{"auths": {"registry.acme.cn": {"auth": "' + DOCKER_AUTH + '"}}}',
        "MIIEpAIBAAKCAQEAoUBWkLFO9+ZMxo" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5" * 2,  # PKCS#1 RSA body
    ],
    ids=["zero-width", "soft hyphen", "full-width", "line split", "one escape", "all escaped", "docker", "pem body"],
)
def test_the_disguises_the_tester_used_are_refused(text):
    assert find_secret(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        '{"auths": {"ghcr.io": {}}, "credsStore": "desktop"}',
        "这是一段\u200b普通的\u200c中文\u200d说明,没有密钥",
        # A certificate body without its header (a6e4495's corpus certificate head): public, not a secret.
        "MIIDXTCCAkWgAwIBAgIJAKL0UG+mRKe" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5" * 2,
        # An RSA public key body (SubjectPublicKeyInfo).
        "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5" * 2,
        "请求 id 3f2b8c1e-9d4a-4b7e-8f6a-2c1d0e9b8a7f 超时",
        "commit 4f1c2a9e8b7d6c5f4e3d2c1b0a9f8e7d6c5b4a39 修复",
    ],
)
def test_look_alikes_of_the_disguise_rules_are_not_refused(text):
    assert find_secret(text) is None


def test_memory_save_refuses_each_disguise_with_content_secret_and_writes_nothing(store_dir, tmp_path):
    from tests.helpers.services import code, make_service

    service = make_service(store_dir, tmp_path)
    try:
        for text in (
            "部署用 " + "\u200b".join(GH),
            "CI 的令牌:" + "".join(chr(ord(c) + 0xFEE0) for c in GH),
            '{"ci": "' + "".join(f"\\u{ord(c):04x}" for c in GH) + '"}',
            '{"auths": {"ghcr.io": {"auth": "' + DOCKER_AUTH + '"}}}',
        ):
            assert code(service.call("memory_save", {"content": text})) == "CONTENT_SECRET", text
        assert not service.call("memory_save", {"content": "这是一段\u200b普通的\u200c中文说明"}).is_error
    finally:
        service.store.close()
    saved = [line for path in store_dir.glob("*.jsonl") for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(saved) == 1 and "普通的" in saved[0]
