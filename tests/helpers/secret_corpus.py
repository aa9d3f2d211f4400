"""A labelled corpus for the credential refusal: real-shaped secrets and the look-alikes a developer saves.

Written from the issuers' published token formats (vendor documentation, and the formats the
gitleaks and detect-secrets projects document), *not* from `service/secrets.py`: it decides what a
memory must never hold, the detector is then measured on it. Every secret is generated from random
bytes in its issuer's shape (never a real key) and put into the kind of sentence an agent would
save — English and Chinese, prose, `.env` lines, YAML, JSON, shell. PEM private keys come from
`openssl` and `ssh-keygen` run at corpus time (left out, and named in `MISSING_TOOLS`, where a tool
is absent). JWTs are really signed (HMAC-SHA256 with a random key; RS256/ES256-sized random
signatures).

Look-alikes (`secret=False`) are what a memory legitimately holds: documentation example keys
(AWS's `AKIAIOSFODNN7EXAMPLE`, jwt.io's sample, Stripe's docs test key, Azurite's well-known key…),
placeholders (`<your-api-key>`, `sk-...`, masked keys), publishable/public keys and ids, hashes,
UUIDs, commit ids, base64 of ordinary text, environment variable *names* without a value, the word
password in prose without one, local development defaults (`mysql://root:root@localhost/test`).

`corpus(seed, draws)` returns `Sample(vendor, secret, text)`; the same seed gives the same corpus
(apart from the openssl/ssh-keygen keys, which are fresh each run). Standard library only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import random
import shutil
import string
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MISSING_TOOLS", "Sample", "corpus"]

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
BASE32 = string.ascii_uppercase + "234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"

#: Tools a part of the corpus needs that this machine lacks (those samples are left out).
MISSING_TOOLS: list[str] = []


@dataclass(frozen=True)
class Sample:
    """One text to save: `secret` says whether the refusal must stop it; `vendor` groups the table."""

    vendor: str
    secret: bool
    text: str


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def chars(self, alphabet: str, n: int) -> str:
        """`n` random characters of `alphabet`; with both letters and digits when it has both
        (an issuer's random part practically always does at these lengths)."""
        has_digits = any(c.isdigit() for c in alphabet)
        has_letters = any(c.isalpha() for c in alphabet)
        while True:
            out = "".join(self.rng.choice(alphabet) for _ in range(n))
            if n < 8 or ((not has_digits or any(c.isdigit() for c in out)) and (not has_letters or any(c.isalpha() for c in out))):
                return out

    def hex(self, n: int) -> str:
        return self.chars(HEX, n)

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + "".join(self.rng.choice(string.digits) for _ in range(n - 1))

    def b64(self, n_bytes: int) -> str:
        return base64.b64encode(self.rng.randbytes(n_bytes)).decode()

    def b64url(self, n_bytes: int) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(n_bytes)).decode().rstrip("=")

    def pick(self, items: list[str]) -> str:
        return self.rng.choice(items)

    def password(self) -> str:
        """A password a person would set: random strong, memorable with digits and symbols, pinyin."""
        kind = self.rng.randrange(5)
        if kind == 0:
            return self.chars(ALNUM + "!#%&*+-_@", self.rng.randint(10, 18))
        if kind == 1:
            word = self.pick(["Summer", "Winter", "Dragon", "Monkey", "Shanghai", "Beijing", "Sunshine", "Galaxy"])
            return f"{word}{self.rng.randint(1990, 2030)}{self.pick(['!', '@', '#', '$', '.'])}"
        if kind == 2:
            name = self.pick(["zhangsan", "lisi", "wangwu", "xiaoming", "laowang", "chenjie"])
            return f"{name}{self.rng.randint(100, 99999)}"
        if kind == 3:
            return self.pick(["P@ssw0rd", "Adm1n", "Qwer", "Welc0me", "Passw0rd"]) + str(self.rng.randint(10, 9999)) + "!"
        return self.chars(LOWER_ALNUM, self.rng.randint(8, 14))


# -- secrets: one generator per issuer's format ---------------------------------------------------

def _secret_formats(g: _Gen) -> dict[str, list[Callable[[], str]]]:
    """Vendor → sentence makers; each call draws a fresh token in its place."""

    def say(*templates: str) -> Callable[[Callable[[], str]], list[Callable[[], str]]]:
        def wrap(token: Callable[[], str]) -> list[Callable[[], str]]:
            return [functools.partial(lambda t, tok: t.replace("{tok}", tok()), t, token) for t in templates]

        return wrap

    aws_id = lambda: g.pick(["AKIA", "ASIA"]) + g.chars(BASE32, 16)  # noqa: E731
    return {
        "OpenAI API key": say(
            "OpenAI 的 API key 是 {tok}",
            "OPENAI_API_KEY={tok}",
            "client = OpenAI(api_key=\"{tok}\")",
            "用这个 key 调 gpt-4o:{tok}",
        )(lambda: g.pick([
            f"sk-{g.chars(ALNUM, 20)}T3BlbkFJ{g.chars(ALNUM, 20)}",
            f"sk-proj-{g.chars(B64URL, 58)}T3BlbkFJ{g.chars(B64URL, 58)}",
            f"sk-svcacct-{g.chars(B64URL, 58)}T3BlbkFJ{g.chars(B64URL, 58)}",
        ])),
        "Anthropic API key": say(
            "ANTHROPIC_API_KEY={tok}",
            "Claude 的 key:{tok}",
            "export ANTHROPIC_API_KEY='{tok}'",
        )(lambda: f"sk-ant-api03-{g.chars(B64URL, 93)}AA"),
        "DeepSeek/Qwen API key": say(
            "DeepSeek 的 key 是 {tok},base_url 用 https://api.deepseek.com",
            "DASHSCOPE_API_KEY={tok}",
            "通义千问调用密钥 {tok}",
        )(lambda: f"sk-{g.hex(32)}"),
        "AWS access key id": say(
            "AWS access key id {tok} 用于部署",
            "aws_access_key_id = {tok}",
            "临时凭据 {tok},一小时后过期",
        )(aws_id),
        "AWS secret access key": say(
            "aws_secret_access_key = {tok}",
            "AWS_SECRET_ACCESS_KEY={tok}",
            "the AWS secret key is {tok}",
            "AWS 的 secret 是 {tok},区域 ap-northeast-1",
            "prod account: access key {id} and secret {tok}",
            "S3 上传用的 AWS 密钥对:{id} / {tok}",
        )(lambda: g.b64(30)),
        "GitHub token": say(
            "GitHub token {tok}",
            "GITHUB_TOKEN={tok}",
            "git clone https://{tok}@github.com/acme/app.git",
            "发布用的 PAT:{tok}",
        )(lambda: g.pick([f"gh{c}_{g.chars(ALNUM, 36)}" for c in "pousr"] + [f"github_pat_{g.chars(ALNUM, 22)}_{g.chars(ALNUM, 59)}"])),
        "GitLab token": say(
            "GitLab PAT {tok}",
            "CI_JOB_TOKEN 换成了 {tok}",
            "runner 注册用 {tok}",
        )(lambda: g.pick([f"glpat-{g.chars(B64URL, 20)}", f"glptt-{g.hex(40)}", f"glrt-{g.chars(B64URL, 20)}"])),
        "Slack token": say(
            "Slack bot: {tok}",
            "SLACK_BOT_TOKEN={tok}",
            "Socket Mode 用的 app token {tok}",
        )(lambda: g.pick([
            f"xoxb-{g.digits(12)}-{g.digits(13)}-{g.chars(ALNUM, 24)}",
            f"xoxp-{g.digits(12)}-{g.digits(12)}-{g.digits(13)}-{g.hex(32)}",
            f"xapp-1-A{g.chars(UPPER_ALNUM, 10)}-{g.digits(13)}-{g.hex(64)}",
        ])),
        "Slack app-level token": say(
            "SLACK_APP_TOKEN={tok}",
            "app-level token(connections:write):{tok}",
        )(lambda: f"xapp-1-A{g.chars(UPPER_ALNUM, 10)}-{g.digits(13)}-{g.hex(64)}"),
        "Slack webhook": say(
            "告警发到 {tok}",
            "SLACK_WEBHOOK_URL={tok}",
        )(lambda: f"https://hooks.slack.com/services/T{g.chars(UPPER_ALNUM, 8)}/B{g.chars(UPPER_ALNUM, 10)}/{g.chars(ALNUM, 24)}"),
        "Stripe secret key": say(
            "Stripe secret key {tok}",
            "STRIPE_SECRET_KEY={tok}",
            "stripe.api_key = \"{tok}\"",
            "测试环境的 Stripe 密钥 {tok}",
        )(lambda: g.pick(["sk_live_", "rk_live_", "sk_test_", "rk_test_"]) + g.chars(ALNUM, int(g.pick(["24", "99"])))),
        "Stripe webhook secret": say(
            "STRIPE_WEBHOOK_SECRET={tok}",
            "webhook 签名密钥是 {tok}",
        )(lambda: f"whsec_{g.chars(ALNUM, 32)}"),
        "Google API key": say(
            "Maps key {tok}",
            "GOOGLE_API_KEY={tok}",
            "Gemini 的 key:{tok}",
        )(lambda: f"AIza{g.chars(B64URL, 35)}"),
        "Google OAuth client secret": say(
            "GOOGLE_CLIENT_SECRET={tok}",
            "\"client_secret\": \"{tok}\"",
            "OAuth 客户端密钥 {tok}",
        )(lambda: f"GOCSPX-{g.chars(B64URL, 28)}"),
        "Google OAuth access token": say(
            "access_token: {tok}",
            "Drive API 的临时令牌 {tok}",
        )(lambda: f"ya29.a0{g.chars(B64URL, 150)}"),
        "Shopify token": say(
            "Shopify admin token {tok}",
            "SHOPIFY_ACCESS_TOKEN={tok}",
            "店铺后台私有 app 的 token:{tok}",
        )(lambda: g.pick(["shpat_", "shpca_", "shppa_", "shpss_"]) + g.hex(32)),
        "Atlassian API token": say(
            "Jira API token: {tok}",
            "JIRA_API_TOKEN={tok}",
            "Confluence 用的 token {tok}",
        )(lambda: f"ATATT3xFfGF0{g.chars(B64URL, 170)}={g.chars('0123456789ABCDEF', 8)}"),
        "Databricks token": say(
            "Databricks PAT {tok}",
            "DATABRICKS_TOKEN={tok}",
            "数仓的 token 是 {tok}",
        )(lambda: f"dapi{g.hex(32)}" + g.pick(["", "-2", "-3"])),
        "HashiCorp Vault token": say(
            "VAULT_TOKEN={tok}",
            "vault login {tok}",
            "Vault 根令牌 {tok}",
        )(lambda: g.pick([f"hvs.{g.chars(B64URL, 92)}", f"hvb.{g.chars(B64URL, 140)}"])),
        "Terraform Cloud token": say(
            "TFC token {tok}",
            "credentials \"app.terraform.io\" { token = \"{tok}\" }",
        )(lambda: f"{g.chars(ALNUM, 14)}.atlasv1.{g.chars(B64URL, 67)}"),
        "Square token": say(
            "Square access token {tok}",
            "SQUARE_ACCESS_TOKEN={tok}",
            "收款用的 Square 密钥 {tok}",
        )(lambda: g.pick([f"sq0atp-{g.chars(B64URL, 22)}", f"sq0csp-{g.chars(B64URL, 43)}", f"EAAA{g.chars(B64URL, 60)}"])),
        "Linear API key": say(
            "LINEAR_API_KEY={tok}",
            "Linear 的 key:{tok}",
        )(lambda: f"lin_api_{g.chars(ALNUM, 40)}"),
        "Twilio credentials": say(
            "TWILIO_AUTH_TOKEN={tok}",
            "Twilio auth token: {tok}",
            "短信服务 Twilio 的 auth token 是 {tok}",
            "twilio api key SK{sk} secret {tok2}",
        )(lambda: g.hex(32)),
        "Mailchimp API key": say(
            "MAILCHIMP_API_KEY={tok}",
            "Mailchimp key {tok}",
            "邮件营销的 key:{tok}",
        )(lambda: f"{g.hex(32)}-us{g.rng.randint(1, 21)}"),
        "Mailgun API key": say(
            "MAILGUN_API_KEY={tok}",
            "mailgun key {tok}",
        )(lambda: f"key-{g.hex(32)}"),
        "SendGrid API key": say(
            "SendGrid {tok}",
            "SENDGRID_API_KEY={tok}",
        )(lambda: f"SG.{g.chars(B64URL, 22)}.{g.chars(B64URL, 43)}"),
        "Discord bot token": say(
            "DISCORD_TOKEN={tok}",
            "Discord 机器人 token {tok}",
            "bot.run(\"{tok}\")",
        )(lambda: base64.b64encode(g.digits(18).encode()).decode().rstrip("=") + f".{g.chars(B64URL, 6)}.{g.chars(B64URL, 38)}"),
        "Discord webhook": say(
            "通知发到 {tok}",
        )(lambda: f"https://discord.com/api/webhooks/{g.digits(18)}/{g.chars(B64URL, 68)}"),
        "Telegram bot token": say(
            "Telegram 机器人 {tok}",
            "TELEGRAM_BOT_TOKEN={tok}",
        )(lambda: f"{g.digits(10)}:AA{g.chars(B64URL, 33)}"),
        "npm token": say(
            "发布用 {tok}",
            "//registry.npmjs.org/:_authToken={tok}",
        )(lambda: f"npm_{g.chars(ALNUM, 36)}"),
        "PyPI token": say(
            "PyPI 上传 token {tok}",
            "password = {tok}",
        )(lambda: f"pypi-AgEIcHlwaS5vcmc{g.chars(B64URL, 70)}"),
        "Hugging Face token": say(
            "HF_TOKEN 为 {tok}",
            "huggingface-cli login --token {tok}",
        )(lambda: f"hf_{g.chars(ALNUM, 34)}"),
        "DigitalOcean token": say(
            "DigitalOcean {tok}",
            "DIGITALOCEAN_TOKEN={tok}",
        )(lambda: g.pick(["dop_v1_", "doo_v1_", "dor_v1_"]) + g.hex(64)),
        "Heroku API key": say(
            "HEROKU_API_KEY={tok}",
            "Heroku 的 key {tok}",
        )(lambda: f"HRKU-AA{g.chars(B64URL, 58)}"),
        "Azure storage key": say(
            "DefaultEndpointsProtocol=https;AccountName=logs{acct};AccountKey={tok};EndpointSuffix=core.windows.net",
            "AZURE_STORAGE_KEY={tok}",
        )(lambda: g.b64(64)),
        "Azure AD client secret": say(
            "AZURE_CLIENT_SECRET={tok}",
            "应用注册的客户端密码 {tok}",
        )(lambda: f"{g.chars(ALNUM + '_~.', 3)}{g.rng.randint(0, 9)}Q~{g.chars(ALNUM + '_~.-', 34)}"),
        "Alibaba Cloud AccessKey": say(
            "阿里云 AccessKey ID {tok},Secret {tok2}",
            "ALIBABA_CLOUD_ACCESS_KEY_ID={tok}\nALIBABA_CLOUD_ACCESS_KEY_SECRET={tok2}",
            "OSS 用的 AccessKey:{tok}",
        )(lambda: f"LTAI{g.chars(ALNUM, 20)}"),
        "Tencent Cloud SecretId": say(
            "腾讯云 SecretId {tok} SecretKey {tok2}",
            "TENCENTCLOUD_SECRET_ID={tok}",
        )(lambda: f"AKID{g.chars(ALNUM, 32)}"),
        "Grafana token": say(
            "GRAFANA_TOKEN={tok}",
            "Grafana 服务账号 token {tok}",
        )(lambda: g.pick([f"glsa_{g.chars(ALNUM, 32)}_{g.hex(8)}", f"glc_{g.chars(B64, 100)}"])),
        "Sentry auth token": say(
            "SENTRY_AUTH_TOKEN={tok}",
            "sentry-cli 用 {tok}",
        )(lambda: g.pick([f"sntryu_{g.hex(64)}", f"sntrys_{g.b64url(120)}"])),
        "Doppler token": say(
            "DOPPLER_TOKEN={tok}",
        )(lambda: f"dp.pt.{g.chars(ALNUM, 43)}"),
        "Postman API key": say(
            "Postman key {tok}",
        )(lambda: f"PMAK-{g.hex(24)}-{g.hex(34)}"),
        "Pulumi token": say(
            "PULUMI_ACCESS_TOKEN={tok}",
        )(lambda: f"pul-{g.hex(40)}"),
        "Supabase token": say(
            "SUPABASE_ACCESS_TOKEN={tok}",
        )(lambda: f"sbp_{g.hex(40)}"),
        "Groq API key": say(
            "GROQ_API_KEY={tok}",
            "Groq 的 key {tok}",
        )(lambda: f"gsk_{g.chars(ALNUM, 52)}"),
        "age secret key": say(
            "sops 用的 age 私钥 {tok}",
        )(lambda: f"AGE-SECRET-KEY-1{g.chars(BECH32, 58)}"),
        "JFrog Artifactory key": say(
            "ARTIFACTORY_API_KEY={tok}",
        )(lambda: f"AKCp8{g.chars(ALNUM, 68)}"),
        "Dropbox token": say(
            "DROPBOX_ACCESS_TOKEN={tok}",
        )(lambda: f"sl.B{g.chars(B64URL, 135)}"),
    }


def _fill(g: _Gen, make: Callable[[], str]) -> str:
    """A sentence with its `{id}`/`{sk}`/`{tok2}`/`{acct}` companions filled too."""
    text = make()
    extra = {
        "{id}": lambda: "AKIA" + g.chars(BASE32, 16),
        "{sk}": lambda: g.hex(32),
        "{tok2}": lambda: g.chars(ALNUM, 32),
        "{acct}": lambda: g.chars(string.ascii_lowercase, 6),
    }
    for key, value in extra.items():
        while key in text:
            text = text.replace(key, value(), 1)
    return text


# -- generated keys (openssl / ssh-keygen) ---------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _generated_keys() -> tuple[tuple[str, str], ...]:
    """(label, PEM text) for private keys made by the real tools now; public parts too (look-alikes)."""
    made: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if shutil.which("openssl"):
            commands = {
                "rsa-pkcs8": ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "k"],
                "rsa-traditional": ["openssl", "genrsa", "-traditional", "-out", "k", "2048"],
                "ec": ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "k"],
                "ed25519": ["openssl", "genpkey", "-algorithm", "ED25519", "-out", "k"],
                "encrypted": ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                              "-aes-256-cbc", "-pass", "pass:corpus-only", "-out", "k"],
            }
            for label, cmd in commands.items():
                key = d / "k"
                key.unlink(missing_ok=True)
                subprocess.run(cmd, cwd=d, check=True, capture_output=True, timeout=60)
                made.append((f"openssl {label}", key.read_text(encoding="ascii")))
                if label == "rsa-pkcs8":
                    pub = subprocess.run(["openssl", "pkey", "-in", "k", "-pubout"], cwd=d, check=True,
                                         capture_output=True, text=True, encoding="ascii", timeout=60).stdout
                    made.append(("public: openssl", pub))
                    cert = subprocess.run(
                        ["openssl", "req", "-new", "-x509", "-key", "k", "-subj", "/CN=corpus.example", "-days", "1"],
                        cwd=d, check=True, capture_output=True, text=True, encoding="ascii", timeout=60).stdout
                    made.append(("public: certificate", cert))
        else:
            MISSING_TOOLS.append("openssl")
        if shutil.which("ssh-keygen"):
            for kind in ("ed25519", "rsa", "ecdsa"):
                key = d / f"id_{kind}"
                subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "dev@laptop", "-f", str(key)],
                               check=True, capture_output=True, timeout=60)
                made.append((f"ssh-keygen {kind}", key.read_text(encoding="ascii")))
                made.append(("public: ssh", Path(str(key) + ".pub").read_text(encoding="ascii").strip()))
        else:
            MISSING_TOOLS.append("ssh-keygen")
    return tuple(made)


def _jwt(g: _Gen, alg: str) -> str:
    def enc(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    header = enc(json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")).encode())
    claims = enc(json.dumps({
        "sub": g.digits(6), "iss": g.pick(["https://auth.acme.dev", "api.internal", "accounts.example.cn"]),
        "iat": g.rng.randint(1_700_000_000, 1_800_000_000), "exp": g.rng.randint(1_800_000_000, 1_900_000_000),
        "scope": g.pick(["read write", "admin", "orders:read"]),
    }, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode()
    if alg == "HS256":
        sig = hmac.new(g.rng.randbytes(32), signing_input, hashlib.sha256).digest()
    else:
        sig = g.rng.randbytes(256 if alg == "RS256" else 64)
    return f"{header}.{claims}.{enc(sig)}"


# -- the corpus -------------------------------------------------------------------------------------


def _secret_samples(g: _Gen, draws: int) -> list[Sample]:
    out: list[Sample] = []
    for vendor, makers in _secret_formats(g).items():
        for i in range(draws):
            out.append(Sample(vendor, True, _fill(g, makers[i % len(makers)])))
    for label, pem in _generated_keys():
        if label.startswith("public"):
            continue
        for text in (
            f"部署私钥:\n{pem}",
            f"id_rsa 内容(别外传)\n{pem}",
            json.dumps({"type": "service_account", "project_id": "acme-prod", "private_key": pem,
                        "client_email": "ci@acme-prod.iam.gserviceaccount.com"}, indent=2),
        ):
            out.append(Sample("private key (" + label.split()[0] + ")", True, text))
    for alg in ("HS256", "RS256", "ES256"):
        for template in ("测试用户的会话 JWT:{t}", "Authorization: Bearer {t}", "cookie session={t}", "id_token = \"{t}\""):
            out.append(Sample("signed JWT", True, template.format(t=_jwt(g, alg))))
    for _ in range(draws):
        pw = g.password()
        host = g.pick(["db.internal", "10.0.3.12", "pg-prod.acme.cn", "rm-bp1xxxx.mysql.rds.aliyuncs.com"])
        out.extend(
            Sample("database URL with password", True, text)
            for text in (
                f"生产库连接串 postgres://app:{pw}@{host}:5432/app",
                f"DATABASE_URL=postgresql://report_ro:{pw}@{host}/analytics?sslmode=require",
                f"mysql://admin:{pw}@{host}:3306/shop",
                f"MONGO_URL=mongodb+srv://admin:{pw}@cluster0.{g.chars(LOWER_ALNUM, 5)}.mongodb.net/prod",
                f"缓存 redis://:{pw}@{host}:6379/0",
                f"amqp://svc:{pw}@{host}:5672/",
                f"Server={host};Database=erp;User Id=sa;Password={pw};",
                f"jdbc:postgresql://{host}:5432/app?user=app&password={pw}",
            )
        )
    for _ in range(draws):
        pw = g.password()
        out.extend(
            Sample("password in an environment variable or flag", True, text)
            for text in (
                f"PGPASSWORD={pw} psql -h db.internal -U app",
                f"export PGPASSWORD='{pw}'",
                f"MYSQL_PWD={pw}",
                f"REDIS_PASSWORD={pw}",
                f"DB_PASSWORD={pw}",
                f"sshpass -p '{pw}' ssh deploy@10.0.0.8",
                f"mysql -u root --password={pw} shop",
            )
        )
    prose_en = [
        "my password is {pw}",
        "the wifi password is {pw}",
        "admin password: {pw}",
        "log in as root with password {pw}",
        "use {pw} as the password for the staging db",
        "the password for the jenkins user is '{pw}'",
        "changed my github password to {pw} today",
        "passphrase for the backup key: {pw}",
        "credentials for the test account: alice / {pw}",
    ]
    prose_zh = [
        "我的密码是{pw}",
        "数据库密码:{pw}",
        "口令:{pw}",
        "root 密码为 {pw}",
        "登录密码是 {pw},别告诉别人",
        "公司 WiFi 密码 {pw}",
        "管理员账号 admin,密码 {pw}",
        "密码改成了 {pw}",
        "跳板机口令是「{pw}」",
    ]
    for i in range(2 * draws):
        out.append(Sample("password in prose (English)", True, prose_en[i % len(prose_en)].format(pw=g.password())))
        out.append(Sample("password in prose (Chinese)", True, prose_zh[i % len(prose_zh)].format(pw=g.password())))
    return out


#: Keys and tokens published in documentation as examples: saving them is harmless.
DOC_EXAMPLES = [
    "AWS 文档里的示例 access key 是 AKIAIOSFODNN7EXAMPLE",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "jwt.io 的示例 token:eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "Stripe 文档的测试 key sk_test_4eC39HqLyjWDarjtT1zdp7dc 可以直接用来跑示例",
    "Stripe docs use sk_test_BQokikJOvBiI2HlWgH4olfQ2 and pk_test_TYooMQauvdEDq54NiTphI7jx in the quickstart",
    "GitHub 文档示例 token ghp_16C7e42F292c6912E7710c838347Ae178B4a(不是真的)",
    "Azurite 本地模拟器的默认 key 是 Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    "Slack 文档里的假 token xoxb-not-a-real-token-this-will-not-work",
    "Twilio 示例 Account SID ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX,auth token your_auth_token",
    "AWS 文档示例 secret key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
]


def _benign_samples(g: _Gen, draws: int) -> list[Sample]:
    out = [Sample("documentation example key", False, text) for text in DOC_EXAMPLES]
    placeholders = [
        "OPENAI_API_KEY=<your-api-key>",
        "api key 填 sk-... 就行,真实的放在 .env",
        "示例:client = OpenAI(api_key=\"sk-xxxxxxxxxxxxxxxxxxxxxxxx\")",
        "ANTHROPIC_API_KEY=sk-ant-...",
        "控制台里显示的 key 是 sk-proj-...Xy3Q(只显示后四位)",
        "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "SLACK_BOT_TOKEN=xoxb-your-bot-token-here",
        "STRIPE_SECRET_KEY=sk_live_...",
        "password: ********",
        "密码:******(已隐藏)",
        "token=<redacted>",
        "api_key: REPLACE_ME",
        "GOOGLE_CLIENT_SECRET=GOCSPX-xxxxx",
        "curl -H 'Authorization: Bearer <token>' https://api.example.com",
        "curl -H \"Authorization: Bearer $API_TOKEN\" https://api.example.com",
        "token: ${{ secrets.NPM_TOKEN }}",
        "password = os.environ['DB_PASSWORD']",
        "const key = process.env.STRIPE_SECRET_KEY",
        "api_key = settings.OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}",
        "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
        "连接串模板 mysql://<user>:<password>@<host>:3306/<db>",
        "HF_TOKEN=hf_***",
        "AKIA****************(已打码)",
        "token 形如 glpat-xxxxxxxxxxxxxxxxxxxx",
        "password=changeme(模板默认值,部署时必须改)",
        "fixture 里写的是 api_key=\"dummy\" 和 secret=\"not-a-secret\"",
        "\"token\": \"test-token\"",
    ]
    out += [Sample("placeholder or masked value", False, text) for text in placeholders]
    local = [
        "本地开发库 mysql://root:root@localhost/test",
        "docker compose 里默认是 postgres://postgres:postgres@localhost:5432/postgres",
        "RabbitMQ 默认账号 amqp://guest:guest@localhost:5672/",
        "mongodb://admin:admin@127.0.0.1:27017 只在本机用",
        "redis://:password@localhost:6379 是示例配置",
        "连接示例 postgresql://user:password@localhost/mydb",
        "postgres://user:pass@localhost:5432/dev",
        "本地数据库 postgres://localhost:5432/app",
        "克隆用 ssh://git@github.com/example/app.git",
        "仓库地址 https://github.com/example/dsh-memory-mcp",
    ]
    out += [Sample("local default or URL without a secret", False, text) for text in local]
    public = [
        f"Stripe publishable key pk_live_{g.chars(ALNUM, 99)}(前端用,公开的)",
        f"前端的 Stripe key:pk_test_{g.chars(ALNUM, 24)}",
        f"Mapbox 公开 token pk.eyJ1IjoiYWNtZSIsImEiOiJ{g.chars(ALNUM, 20)}.{g.chars(B64URL, 22)}",
        f"Google OAuth client id {g.digits(12)}-{g.chars(LOWER_ALNUM, 32)}.apps.googleusercontent.com",
        f"Sentry DSN https://{g.hex(32)}@o{g.digits(6)}.ingest.sentry.io/{g.digits(7)}",
        f"Stripe 客户 id cus_{g.chars(ALNUM, 14)},订单 pi_{g.chars(ALNUM, 24)}",
        f"Twilio 账号 SID 在控制台首页(AC 开头),消息 id SM{g.hex(32)}",
        f"Slack 频道 id C0{g.chars(UPPER_ALNUM, 9)},用户 U0{g.chars(UPPER_ALNUM, 9)}",
        f"GA4 measurement id G-{g.chars(UPPER_ALNUM, 10)}",
        f"部署角色 arn:aws:iam::{g.digits(12)}:role/deploy",
        f"S3 桶 s3://acme-logs-{g.chars(LOWER_ALNUM, 8)}/2024/",
    ]
    out += [Sample("public key or identifier", False, text) for text in public]
    for label, text in _generated_keys():
        if label.startswith("public"):
            out.append(Sample("public key or certificate", False, f"服务器公钥:\n{text}"))
    out += [
        Sample("private key header only", False, "私钥文件以 -----BEGIN OPENSSH PRIVATE KEY----- 开头,权限要 600"),
        Sample("private key header only", False, "if the file starts with -----BEGIN RSA PRIVATE KEY----- it is PKCS#1"),
    ]
    for _ in range(draws):
        out += [
            Sample("hash or digest", False, text)
            for text in (
                f"回归是在 commit {g.hex(40)} 引入的",
                f"修复见 {g.hex(7)},已合入 main",
                f"安装包 sha256: {hashlib.sha256(g.rng.randbytes(64)).hexdigest()}",
                f"镜像 python@sha256:{hashlib.sha256(g.rng.randbytes(64)).hexdigest()}",
                "npm integrity sha512-" + base64.b64encode(hashlib.sha512(g.rng.randbytes(64)).digest()).decode(),
                f"md5 {hashlib.md5(g.rng.randbytes(16)).hexdigest()}  release.tar.gz",
                f"用户表里的 bcrypt 哈希 $2b$12${g.chars(ALNUM + './', 53)}",
                f"ETag: \"{g.hex(32)}\"",
                f"Mongo ObjectId {g.hex(24)}",
            )
        ]
        out += [
            Sample("UUID or generated id", False, text)
            for text in (
                f"请求 id {uuid.UUID(bytes=g.rng.randbytes(16), version=4)} 超时",
                f"租户 {str(uuid.UUID(bytes=g.rng.randbytes(16), version=4)).upper()}",
                f"trace_id={g.hex(32)} span_id={g.hex(16)}",
                f"ULID {g.chars('0123456789ABCDEFGHJKMNPQRSTVWXYZ', 26)}",
                f"短链 id {g.chars(B64URL, 21)}",
                f"pod web-{g.chars(LOWER_ALNUM, 10)}-{g.chars(LOWER_ALNUM, 5)} 反复重启",
            )
        ]
        sentence = g.pick(["数据库连接池大小改成 20", "下周一上线新版本", "hello world, this is just text", "缓存过期时间 300 秒"])
        out += [
            Sample("base64 of non-secret data", False, text)
            for text in (
                "配置的 base64 是 " + base64.b64encode(sentence.encode()).decode(),
                "kubeconfig 的 certificate-authority-data: " + base64.b64encode(g.rng.randbytes(600)).decode()[:120] + "…",
                "图标 data:image/png;base64,iVBORw0KGgo" + g.b64(40),
                "JSON 的 base64:" + base64.b64encode(json.dumps({"theme": "dark", "lang": "zh"}).encode()).decode(),
            )
        ]
    names = [
        "OpenAI API key 放在 1Password 的「OpenAI」条目里,运行时读环境变量 OPENAI_API_KEY",
        "设置 AWS_SECRET_ACCESS_KEY 和 AWS_ACCESS_KEY_ID 两个环境变量即可",
        "GITHUB_TOKEN 在 CI 里由 secrets 注入",
        "不要把 PGPASSWORD 写进脚本,用 ~/.pgpass",
        ".env 里有 STRIPE_SECRET_KEY 和 STRIPE_WEBHOOK_SECRET 两项",
        "export PGPASSWORD  # 值从 vault 读",
        "PGPASSWORD=$(cat ~/.secrets/pg) psql -h db",
        "MYSQL_PWD=\"$DB_PASS\" mysql -u app",
        "ANTHROPIC_API_KEY 没设置时 SDK 会报错",
        "DSH_MEMORY_ALLOW_SECRETS=1 可以关掉这个检查",
        "token: 用环境变量 GITHUB_TOKEN 传入",
        "AKIA 开头的是 AWS access key id,别存进记忆",
        "ghp_ 前缀代表 GitHub personal access token",
        "sk- 开头的一般是 OpenAI 或兼容服务的 key",
        "eyJ 开头的字符串通常是 JWT",
        "扫描规则 ghp_[0-9a-zA-Z]{36} 匹配 GitHub token",
    ]
    out += [Sample("variable or prefix named, no value", False, text) for text in names]
    prose = [
        "The password policy requires at least 12 characters",
        "password is required",
        "the password must contain a digit and a symbol",
        "reset your password from the settings page",
        "the password is stored in 1Password, not here",
        "password is the same as on staging (ask Bob)",
        "passwords are hashed with argon2id before storage",
        "密码是必填项",
        "密码长度至少 12 位,必须包含数字和字母",
        "密码:见 1Password 里的 prod-db 条目",
        "忘记密码时走邮箱重置",
        "密码错误 5 次锁定 30 分钟",
        "密码已改为从 Vault 读取",
        "口令由运维统一管理,别问我",
        "password reset 邮件由 auth 服务发送",
        "secret: 存在 Vault 的 secret/data/app 路径下",
        "\"password\": {\"type\": \"string\", \"minLength\": 8}",
        "SSH password authentication is disabled; keys only",
    ]
    out += [Sample("password mentioned without a value", False, text) for text in prose]
    config_like = [
        "调用时 max_tokens=4096,temperature=0.2",
        "上下文 token 上限是 8192",
        "session_token_ttl=3600",
        "tokens: 12000(本月用量)",
        "token_type: Bearer,expires_in: 3600",
        "api_key_header = \"X-API-Key\"",
        "password_min_length = 12",
        "refresh_token 有效期 30 天,access_token 1 小时",
        "token_url: https://auth.example.com/oauth/token",
        "secret_name: prod/db/credentials",
        "auth: { type: password }",
        "credentials: ~/.aws/credentials",
    ]
    out += [Sample("configuration that names a credential field", False, text) for text in config_like]
    plain = [
        "我们在 2024 年 3 月把 QPS 从 1200 提升到 4800,延迟 p99 35 ms",
        "工号 20231234 的同事负责发布,电话分机 8021",
        "网关 fe80::1ff:fe23:4567:890a,MAC 00:1A:2B:3C:4D:5E",
        "版本号 v2.14.3-rc.1+build.5678",
        "主题色 #1E90FF,边框 #333",
        "getUserAccountSettingsByTenantIdAndRegion 是那个慢接口",
        "订单号 E20240315123456789012 已退款",
        "快递单号 SF1234567890123",
        "模型用 claude-3-5-sonnet-20241022,备选 gpt-4o-2024-08-06",
        "特征工程用 scikit-learn(sklearn)",
    ]
    out += [Sample("ordinary technical text", False, text) for text in plain]
    return out


def corpus(seed: int = 20261201, draws: int = 6) -> list[Sample]:
    """The labelled corpus: `draws` samples per secret format (several sentence shapes each), the
    generated keys and JWTs, database URLs, passwords in variables and prose; then the look-alikes."""
    g = _Gen(random.Random(seed))
    return _secret_samples(g, draws) + _benign_samples(g, draws)


# -- a held-out set ---------------------------------------------------------------------------------
# Written after the detector was first tuned on `corpus()` and before it was measured on this:
# other sentence shapes, files and tools, and formats `corpus()` does not have. Its first
# measurement is the honest "not tuned against" figure (see tests/test_secrets.py).


def holdout(seed: int = 7, draws: int = 3) -> list[Sample]:
    """Secrets and look-alikes in shapes `corpus()` does not use."""
    g = _Gen(random.Random(seed))
    out: list[Sample] = []

    def secret(vendor: str, *texts: str) -> None:
        out.extend(Sample(vendor, True, text) for text in texts)

    def benign(vendor: str, *texts: str) -> None:
        out.extend(Sample(vendor, False, text) for text in texts)

    for _ in range(draws):
        aws_id, aws_secret = "AKIA" + g.chars(BASE32, 16), g.b64(30)
        secret("holdout: AI provider keys",
               f"帮我记一下:新的 OpenAI key {'sk-proj-' + g.chars(B64URL, 58) + 'T3BlbkFJ' + g.chars(B64URL, 58)}",
               f"openai:\n  api_key: sk-{g.chars(ALNUM, 20)}T3BlbkFJ{g.chars(ALNUM, 20)}",
               f"[anthropic]\napi_key = \"sk-ant-api03-{g.chars(B64URL, 93)}AA\"",
               f"OpenRouter: sk-or-v1-{g.hex(64)}")
        secret("holdout: cloud credentials",
               f"[default]\naws_access_key_id={aws_id}\naws_secret_access_key={aws_secret}",
               f"Secret Access Key 是 {g.b64(30)}",
               f"AWS key pair {aws_id}:{aws_secret}",
               f"阿里云 RAM 用户 AccessKey LTAI{g.chars(ALNUM, 20)}")
        secret("holdout: code hosting and CI",
               f"git remote set-url origin https://x-access-token:ghs_{g.chars(ALNUM, 36)}@github.com/acme/app",
               f"my slack token xoxp-{g.digits(12)}-{g.digits(12)}-{g.digits(13)}-{g.hex(32)}",
               f"CI 里的 GitLab deploy token gldt-{g.chars(B64URL, 20)}",
               f"npm config set //registry.npmjs.org/:_authToken npm_{g.chars(ALNUM, 36)}")
        secret("holdout: SaaS keys in code and headers",
               f"Stripe::setApiKey('sk_live_{g.chars(ALNUM, 24)}');",
               f"curl -H \"X-Shopify-Access-Token: shpat_{g.hex(32)}\" https://acme.myshopify.com/admin/api/2024-01/shop.json",
               f"curl -u me@corp.com:ATATT3xFfGF0{g.chars(B64URL, 170)}={g.chars('0123456789ABCDEF', 8)} https://acme.atlassian.net/rest/api/3/myself",
               f"export VAULT_TOKEN=hvs.CAES{g.chars(B64URL, 88)}",
               f"curl -H 'Authorization: Bearer EAAA{g.chars(B64URL, 60)}' https://connect.squareup.com/v2/locations",
               f"mailchimp.setConfig({{apiKey: \"{g.hex(32)}-us6\", server: \"us6\"}})",
               f"TWILIO_ACCOUNT_SID=AC{g.hex(32)}\nTWILIO_AUTH_TOKEN={g.hex(32)}",
               f"discord bot token: {base64.b64encode(g.digits(18).encode()).decode().rstrip('=')}.{g.chars(B64URL, 6)}.{g.chars(B64URL, 38)}")
        secret("holdout: webhooks with a secret path",
               f"Teams 通知 https://acme.webhook.office.com/webhookb2/{uuid.UUID(bytes=g.rng.randbytes(16), version=4)}@{uuid.UUID(bytes=g.rng.randbytes(16), version=4)}/IncomingWebhook/{g.hex(32)}/{uuid.UUID(bytes=g.rng.randbytes(16), version=4)}",
               f"飞书机器人 https://open.feishu.cn/open-apis/bot/v2/hook/{uuid.UUID(bytes=g.rng.randbytes(16), version=4)}",
               f"钉钉群机器人 https://oapi.dingtalk.com/robot/send?access_token={g.hex(64)}",
               f"企业微信机器人 https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={uuid.UUID(bytes=g.rng.randbytes(16), version=4)}")
        pw = g.password()
        secret("holdout: passwords in commands",
               f"docker login -u deploy -p '{pw}' registry.acme.cn",
               f"curl -u admin:{pw} https://jenkins.acme.dev/api/json",
               f"redis-cli -h cache -a '{pw}' ping",
               f"mysql -uroot -p{pw} -h 10.0.0.5 shop",
               f"kubectl create secret generic db --from-literal=password={pw}")
        secret("holdout: passwords in files",
               f"stringData:\n  username: app\n  password: {g.password()}",
               f"[pypi]\nusername = __token__\npassword = {g.password()}",
               f"spring.datasource.password={g.password()}",
               f"\"db\": {{\"host\": \"10.1.2.3\", \"user\": \"app\", \"pass\": \"{g.password()}\"}}",
               f"<add key=\"DbPassword\" value=\"{g.password()}\" />")
        secret("holdout: passwords in prose",
               f"the root pw is {g.password()}",
               f"服务器登录:ssh root@10.0.0.{g.rng.randint(2, 250)},密码 {g.password()}",
               f"邮箱授权码 {g.chars(string.ascii_lowercase, 16)}",
               f"微信公众号 AppSecret 是 {g.hex(32)}",
               f"VPN 账号 zhang.san,口令 {g.password()}",
               f"I set the router admin password to {g.password()} yesterday",
               f"新密码:{g.password()}(下次登录要改)")
        secret("holdout: keys without a PEM header",
               "支付宝应用私钥 MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ" + g.chars(B64, 300))

        benign("holdout: keys named or described, no value",
               "把 OPENAI_API_KEY 配成 sk-proj- 开头的那个(在 1Password)",
               "API key 格式:sk-ant-api03- 后面 93 个字符再加 AA",
               "pk_live_ keys are safe to expose in the browser",
               "GitHub Actions 里用 ${{ secrets.GITHUB_TOKEN }} 就行",
               "Slack 频道 #alerts 的 webhook 放在 Vault 里",
               "我们用 HMAC-SHA256 签名,密钥轮换周期 90 天",
               "token 刷新逻辑在 auth/refresh.py,过期前 5 分钟刷新",
               "the token endpoint returns {\"access_token\": \"...\", \"expires_in\": 3600}")
        benign("holdout: identifiers and numbers",
               "Stripe 测试卡号 4242 4242 4242 4242,有效期任意未来日期",
               f"AWS 账号 ID {g.digits(12)}",
               f"commit {g.hex(7)} 修复了 token 刷新",
               f"heroku app id {uuid.UUID(bytes=g.rng.randbytes(16), version=4)}",
               f"Twilio 消息 SID SM{g.hex(32)} 发送失败",
               f"Vault 路径 secret/data/{g.chars(string.ascii_lowercase, 6)}/db,版本 {g.rng.randint(2, 40)}",
               f"文件 sha1 {hashlib.sha1(g.rng.randbytes(20)).hexdigest()}",
               # Labelled a secret when this set was first measured; it is the key's *id* (the
               # private key itself is another field), so it moved here.
               f"gcloud 服务账号 key 的 private_key_id 是 {g.hex(40)},私钥见附件",
               "JWT 头部 eyJhbGciOiJIUzI1NiJ9 就是 {\"alg\":\"HS256\"}",
               "配置的 base64:" + base64.b64encode(json.dumps({"retries": 3, "region": "cn-hangzhou"}).encode()).decode(),
               f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ{g.chars(B64, 200)} dev@mbp")
        benign("holdout: local defaults and schemas",
               "docker run -e POSTGRES_PASSWORD=postgres postgres:16",
               "MYSQL_ROOT_PASSWORD=root 只用于本地测试",
               "password: {type: string, format: password, minLength: 12}",
               "本地 redis://localhost:6379/0 不需要密码",
               "测试库 mysql://test:test@127.0.0.1:3306/test_db",
               "`--password` 参数已废弃,改用 `--password-file`",
               "登录失败提示「用户名或密码错误」",
               "the password field is hidden behind a toggle")
    return out


# -- disguised secrets (issue 32) -------------------------------------------------------------------
# The corpus formats hidden the way a paste or an attacker hides them: a format character (zero-width
# space/joiners, word joiner, BOM, soft hyphen) inside, full-width forms, a line break (with
# indentation) inside, `\u` escapes in JSON; plus Docker's `auths` blob and a PEM body without its
# header. Look-alikes for each: text that really holds those characters or shapes and no secret.
# Decided: a certificate or a public key (with or without its header) is not a secret.

_FORMAT_CHARS = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _escaped(text: str, every: bool) -> str:
    """`text` as a JSON string body with `\\u` escapes: every character, or only its `_`, `-` and `.`."""
    return "".join(f"\\u{ord(c):04x}" if every or c in "_-." else c for c in text)


def _pem_body(pem: str) -> str:
    return "\n".join(line for line in pem.strip().splitlines() if not line.startswith("-----"))


def disguised(seed: int = 32, draws: int = 3) -> list[Sample]:
    """Disguised GitHub/Stripe/Slack tokens, Docker auths, bare PEM bodies, and their look-alikes."""
    g = _Gen(random.Random(seed))
    out: list[Sample] = []

    def tokens() -> list[str]:
        return [
            f"ghp_{g.chars(ALNUM, 36)}",
            f"github_pat_{g.chars(ALNUM, 22)}_{g.chars(ALNUM, 59)}",
            f"sk_live_{g.chars(ALNUM, 24)}",
            f"rk_live_{g.chars(ALNUM, 99)}",
            f"xoxb-{g.digits(12)}-{g.digits(13)}-{g.chars(ALNUM, 24)}",
            f"xoxp-{g.digits(12)}-{g.digits(12)}-{g.digits(13)}-{g.hex(32)}",
        ]

    for _ in range(draws):
        for tok in tokens():
            at = g.rng.randint(5, len(tok) - 3)
            for mark in _FORMAT_CHARS:
                out.append(Sample("disguised: format character inside", True, f"token {tok[:at]}{mark}{tok[at:]}"))
            spread = "\u200b".join(tok)
            out.append(Sample("disguised: format character inside", True, f"部署用 {spread}"))
            out.append(Sample("disguised: full-width", True, f"CI 的令牌:{_fullwidth(tok)}"))
            out.append(Sample("disguised: full-width", True, f"{_fullwidth('TOKEN=' + tok)}"))
            out.append(Sample("disguised: line split", True, f"export GH_TOKEN={tok[:at]}\n{tok[at:]}"))
            out.append(Sample("disguised: line split", True, f"ci:\n  token: {tok[:at]}\n    {tok[at:]}\n  region: cn"))
            out.append(Sample("disguised: line split", True, f"发布用的 key 是 {tok[:at]}\r\n{tok[at:]},别外传"))
            out.append(Sample("disguised: JSON \\u escapes", True, '{"token": "' + _escaped(tok, False) + '"}'))
            out.append(Sample("disguised: JSON \\u escapes", True, '{"ci": "' + _escaped(tok, True) + '"}'))
        for registry in ("registry.acme.cn", "https://index.docker.io/v1/", "ghcr.io"):
            blob = base64.b64encode(f"{g.pick(['deploy', 'ci-bot', 'zhangsan'])}:{g.password()}".encode()).decode()
            out.append(Sample("disguised: Docker auths", True, json.dumps({"auths": {registry: {"auth": blob}}})))
            out.append(
                Sample(
                    "disguised: Docker auths",
                    True,
                    "~/.docker/config.json:\n" + json.dumps({"auths": {registry: {"auth": blob, "email": "ci@acme.cn"}}}, indent=4),
                )
            )
    for label, pem in _generated_keys():
        body = _pem_body(pem)
        if label.startswith("public"):
            out.append(Sample("disguised look-alike: public key or certificate body", False, f"证书内容:\n{body}"))
            continue
        out.append(Sample("disguised: PEM body without header", True, f"私钥正文(没带头):\n{body}"))
        out.append(Sample("disguised: PEM body without header", True, body))
        out.append(Sample("disguised: PEM body without header", True, json.dumps({"key": body.replace("\n", "")})))

    benign = [
        "这是一段\u200b普通的\u200c中文\u200d说明\u2060,没有\ufeff任何密钥",
        "部署\u200b文档\u200b在 wiki 的\u200b「发布流程」\u200b页面",
        "pass\u00adword policy: at least 12 char\u00adacters",
        "GitHub\u200b token 的\u200b前缀是 ghp_,Stripe 是 sk_live_",
        _fullwidth("QPS=4800") + ",延迟 " + _fullwidth("p99=35ms"),
        "订单号" + _fullwidth("20240315123456789012") + "已退款",
        "ｓｋ－ｌｅａｒｎ 是 scikit-learn 的简称",
        json.dumps({"note": "数据库连接池大小改成 20", "owner": "张三"}),
        json.dumps({"token_type": "Bearer", "expires_in": 3600, "说明": "令牌一小时过期"}),
        '{"path": "C:\\\\Users\\\\dev\\\\project", "tip": "\\u4f7f\\u7528 make build"}',
        json.dumps({"auths": {"ghcr.io": {}, "registry.acme.cn": {}}, "credsStore": "desktop"}),
        json.dumps({"auths": {}, "credHelpers": {"123456789012.dkr.ecr.us-east-1.amazonaws.com": "ecr-login"}}),
        '{"auths": {"registry.acme.cn": {"auth": "<base64 of user:password>"}}}',
        "config.json 里 auths 下面的 auth 字段是 base64(user:password),别存它",
        "按行写:\nghp_ 前缀\n代表 GitHub personal access token",
        "依赖:\n  sk-\n  learn 不要拼错",
        "步骤\n1. 打开设置\n2. 点击 token\n3. 复制到 1Password",
    ]
    for _ in range(draws):
        benign += [
            f"commit {g.hex(40)} 修复了 token 刷新",
            f"请求 id {uuid.UUID(bytes=g.rng.randbytes(16), version=4)} 超时",
            f"sha256:\n{g.hex(32)}\n{g.hex(32)}",
            "图标 data:image/png;base64,iVBORw0KGgo" + g.b64(120),
            "图片:\ndata:image/jpeg;base64,/9j/4AAQSkZJRg\n" + "\n".join(g.b64(48) for _ in range(4)),
            "kubeconfig 的 certificate-authority-data: " + base64.b64encode(g.rng.randbytes(300)).decode(),
            f"镜像 digest\n  sha256:{g.hex(32)}\n  {g.hex(32)}",
            "文件内容(base64):\n" + "\n".join(g.b64(48) for _ in range(5)),
            f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.b64(24)} dev@laptop",
        ]
    out += [Sample("disguised look-alike", False, text) for text in benign]
    return out
