"""A realistic memory table and the queries a developer would type against it.

The memories are what agents save for a Chinese-speaking developer who also writes English: rules,
preferences, facts about the machine and one project, identifiers, paths and versions. The queries
were written as a user would ask, *before* looking at what the tokenizer does with them; a
reasonable query that fails is a scoring bug, not a query to drop.
"""

from __future__ import annotations

from dataclasses import dataclass

GLOBAL = "global"
PROJECT = "project:/home/dev/shop"


@dataclass(frozen=True)
class Memory:
    id: str
    scope: str
    kind: str
    content: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Query:
    text: str
    expected: tuple[str, ...]  # ids that must be in the top 5; empty = must return nothing
    why: str


MEMORIES: tuple[Memory, ...] = (
    # --- global: the developer's habits and machine ---
    Memory(
        "g01",
        GLOBAL,
        "rule",
        "前端项目统一用 TypeScript 严格模式(strict: true),不要关掉 noImplicitAny",
        ("typescript", "前端"),
    ),
    Memory(
        "g02",
        GLOBAL,
        "preference",
        "Use pnpm instead of npm for all JavaScript projects; npm install breaks the lockfile.",
        ("pnpm",),
    ),
    Memory("g03", GLOBAL, "rule", "提交信息用中文写,格式为「类型: 简述」,例如 fix: 修复登录页白屏", ("git", "commit")),
    Memory("g04", GLOBAL, "preference", "Python 代码用 ruff 做 lint 和格式化,不再用 black 和 isort"),
    Memory(
        "g05",
        GLOBAL,
        "fact",
        "The DSH memory store directory is set by DSH_MEMORY_STORE_DIR; the default is ~/.dsh/memory",
    ),
    Memory(
        "g06",
        GLOBAL,
        "procedure",
        "本机 DSH 的 desktop profile 由 Electron 应用独占管理,不要手动改 profile 目录",
        ("DSH", "desktop profile"),
    ),
    Memory(
        "g07", GLOBAL, "preference", "Indent with 4 spaces in Python and 2 spaces in YAML and JSON files; never tabs"
    ),
    Memory("g08", GLOBAL, "preference", "用户偏好简洁的回答:先给结论再解释,不要长篇大论"),
    Memory("g09", GLOBAL, "fact", "The user's name is 李明; address him as Ming in English conversations"),
    Memory(
        "g10",
        GLOBAL,
        "rule",
        "Never commit .env files; secrets go to 1Password and are loaded with direnv",
        ("security",),
    ),
    Memory("g11", GLOBAL, "fact", "llama-server 默认端口是 8078,本项目的 MCP 实例用 8199 避免冲突"),
    Memory("g12", GLOBAL, "fact", "Node.js 版本要求 >= 20.3.0,低于它 AbortSignal.any 会报错"),
    Memory("g13", GLOBAL, "procedure", "代码评审时先看测试是否覆盖边界条件,再看命名和注释"),
    Memory(
        "g14",
        GLOBAL,
        "procedure",
        "Docker images are built with BuildKit: run `DOCKER_BUILDKIT=1 docker build .` on the CI runner",
    ),
    Memory("g15", GLOBAL, "rule", "日志统一输出到 stderr,stdout 只留给 MCP 协议"),
    Memory("g16", GLOBAL, "fact", "The user works on macOS with zsh; shell snippets should be zsh-compatible"),
    Memory("g17", GLOBAL, "procedure", "数据库迁移用 Alembic,每次迁移前先备份生产库"),
    Memory("g18", GLOBAL, "rule", "Git 分支命名: feature/<ticket>-<short-name>,例如 feature/JIRA-123-login-page"),
    Memory(
        "g19",
        GLOBAL,
        "fact",
        "VS Code settings sync is off; the editor config lives in ~/dotfiles/vscode/settings.json",
    ),
    Memory("g20", GLOBAL, "fact", "Kubernetes 集群用 k3s 部署在家里的 NUC 上,kubeconfig 在 ~/.kube/home.yaml"),
    Memory("g21", GLOBAL, "preference", "写单元测试用 pytest,不要用 unittest 的 TestCase 类"),
    Memory("g22", GLOBAL, "preference", "Reply in Chinese unless the user writes in English first"),
    Memory("g23", GLOBAL, "procedure", "周报每周五下午五点前发给张经理"),
    Memory(
        "g24",
        GLOBAL,
        "procedure",
        "When a test is flaky, rerun it at most once, then open an issue instead of retrying forever",
    ),
    Memory("g25", GLOBAL, "rule", "社内ドキュメントはです・ます調で書く"),
    Memory("g26", GLOBAL, "preference", "React 组件用函数式写法和 Hooks,不写 class 组件"),
    Memory("g27", GLOBAL, "fact", "The embedding model is qwen3-embedding-0.6b with 1024 dimensions"),
    Memory("g28", GLOBAL, "fact", "常用的跳板机 IP 是 10.0.3.15,SSH 用户名 deploy"),
    Memory("g29", GLOBAL, "rule", "Use Conventional Commits in English for open-source repos (feat:, fix:, chore:)"),
    Memory("g30", GLOBAL, "fact", "在 Neovim 里用 <leader>ff 打开 Telescope 查找文件"),
    # --- project: a FastAPI + Vue shop ---
    Memory("p01", PROJECT, "fact", "本项目后端是 FastAPI + PostgreSQL 16,ORM 用 SQLAlchemy 2.0"),
    Memory(
        "p02",
        PROJECT,
        "procedure",
        "Run the dev server with `make dev`; it starts FastAPI on port 8000 and Vite on 5173",
    ),
    Memory("p03", PROJECT, "fact", "支付模块对接的是微信支付 V3 接口,证书放在 secrets/wechatpay/"),
    Memory(
        "p04",
        PROJECT,
        "fact",
        "The config loader reads config/app.toml first, then overrides it with SHOP_* environment variables",
    ),
    Memory("p05", PROJECT, "decision", "订单状态机: pending → paid → shipped → completed,只有 paid 之前可以取消"),
    Memory("p06", PROJECT, "decision", "We decided to keep sessions in Redis instead of Postgres tables, for latency"),
    Memory("p07", PROJECT, "fact", "前端在 web/ 目录,用 Vue 3 + Vite,状态管理用 Pinia"),
    Memory("p08", PROJECT, "procedure", "E2E tests use Playwright; run `pnpm test:e2e` from the web/ folder"),
    Memory("p09", PROJECT, "fact", "商品图片上传到阿里云 OSS,bucket 名是 shop-assets-prod"),
    Memory(
        "p10",
        PROJECT,
        "fact",
        "The function calculate_order_total in app/services/pricing.py applies discounts and coupons",
    ),
    Memory("p11", PROJECT, "rule", "API 响应格式统一为 {code, message, data},错误码见 docs/errors.md"),
    Memory("p12", PROJECT, "fact", "Release v2.4.1 fixed the coupon rounding bug; v2.5.0 adds refunds"),
    Memory("p13", PROJECT, "procedure", "部署流程:合并到 main 后 GitHub Actions 构建镜像,人工批准后发布到生产环境"),
    Memory(
        "p14",
        PROJECT,
        "procedure",
        "Database migrations live in migrations/versions and are generated with `alembic revision --autogenerate`",
    ),
    Memory("p15", PROJECT, "fact", "The user model's lastLoginAt field is stored as UTC milliseconds"),
    Memory("p16", PROJECT, "rule", "库存扣减必须在事务里做,并用 SELECT ... FOR UPDATE 加行锁,防止超卖"),
    Memory("p17", PROJECT, "fact", "Backend logging uses structlog and writes JSON lines in production"),
    Memory("p18", PROJECT, "fact", "客服系统的 webhook 地址是 https://support.example.com/hooks/shop"),
)


QUERIES: tuple[Query, ...] = (
    # English paraphrases that share some words with the memory
    Query(
        "which package manager should I use for JavaScript?", ("g02",), "English question, shares 'use', 'javascript'"
    ),
    Query("where is the memory store directory configured", ("g05",), "English paraphrase"),
    Query("how do I start the dev server", ("p02",), "English paraphrase"),
    Query("where are sessions stored? redis or postgres", ("p06",), "English, project decision"),
    Query("what to do when a test is flaky", ("g24",), "English procedure"),
    Query("secrets and .env files", ("g10",), "English keywords"),
    Query("embedding dimensions", ("g27",), "English keywords"),
    Query("docker build on CI", ("g14",), "English keywords"),
    Query("which shell does the user use", ("g16",), "English question about the machine"),
    Query("coupon rounding bug", ("p12",), "English keywords, project fact"),
    Query("Playwright e2e tests", ("p08",), "English keywords"),
    Query("structlog JSON logging", ("p17",), "English keywords"),
    # Chinese, 2–6 characters
    Query("严格模式", ("g01",), "Chinese 4 chars"),
    Query("提交信息", ("g03",), "Chinese 4 chars"),
    Query("数据库迁移", ("g17",), "Chinese 5 chars"),
    Query("端口", ("g11",), "Chinese 2 chars"),
    Query("微信支付", ("p03",), "Chinese 4 chars"),
    Query("库存", ("p16",), "Chinese 2 chars"),
    Query("周报", ("g23",), "Chinese 2 chars"),
    Query("部署流程", ("p13",), "Chinese 4 chars"),
    Query("日志输出", ("g15",), "Chinese 4 chars"),
    Query("订单状态", ("p05",), "Chinese 4 chars"),
    Query("函数式组件", ("g26",), "Chinese 5 chars"),
    Query("回答要简洁", ("g08",), "Chinese 5 chars, paraphrase"),
    Query("生产库备份", ("g17",), "Chinese 5 chars, reordered words"),
    Query("代码评审", ("g13",), "Chinese 4 chars"),
    # Single Chinese characters
    Query("锁", ("p16",), "single character"),
    Query("库", ("g17", "p16"), "single character, two records"),
    Query("图", ("p09",), "single character"),
    # Mixed Chinese and Latin
    Query("TypeScript 严格", ("g01",), "mixed"),
    Query("Vue 状态管理", ("p07",), "mixed"),
    Query("FastAPI 端口", ("p02",), "mixed, the port is written in English"),
    Query("pytest 单元测试", ("g21",), "mixed"),
    Query("React Hooks 写法", ("g26",), "mixed"),
    Query("Redis 会话", ("p06",), "mixed, the Chinese word is not in the memory"),
    Query("阿里云 OSS bucket", ("p09",), "mixed"),
    Query("Git 分支命名规则", ("g18",), "mixed"),
    # Identifiers, paths, versions, numbers
    Query("DSH_MEMORY_STORE_DIR", ("g05",), "environment variable"),
    Query("calculate_order_total", ("p10",), "snake_case function"),
    Query("order total", ("p10",), "parts of a snake_case identifier"),
    Query("lastLoginAt", ("p15",), "camelCase field"),
    Query("pricing.py", ("p10",), "file name"),
    Query("v2.4.1", ("p12",), "version"),
    Query("config/app.toml", ("p04",), "path"),
    Query("8199", ("g11",), "port number"),
    Query("AbortSignal.any", ("g12",), "API name"),
    Query("qwen3-embedding-0.6b", ("g27",), "model id"),
    # Japanese
    Query("ドキュメント", ("g25",), "katakana"),
    # Nothing relevant is stored
    Query("kafka consumer lag", (), "English, nothing about Kafka"),
    Query("how do I configure kafka consumer lag alerts?", (), "English question, nothing about Kafka"),
    Query("量子计算", (), "Chinese, nothing about quantum computing"),
    Query("!!! ??? ...", (), "punctuation only"),
)
