"""A bilingual semantic evaluation: memories, paraphrase queries, and queries with no answer.

Used by `tests/test_semantic_eval.py` and `scripts/bench.py --semantic`. The queries were
written as a user would ask, in other words than the memory they target:

* ``zh``: Chinese query → Chinese memory, sharing **no CJK bigram** with it (the test checks);
* ``en``: English paraphrase → English memory, few or no shared words;
* ``zh-en`` / ``en-zh``: cross-language, Chinese query → English memory and back;
* ``none``: nothing in the table is about it: a good search returns nothing.

Every memory is on its own topic, so each answerable query has exactly one right memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_memory_mcp.config import VectorSettings
    from dsh_memory_mcp.search.vectors import VectorChannel
    from dsh_memory_mcp.store.shared import SharedStore

#: Evaluations measure quality, not speed: a query may take this long (the 300 ms budget is tested elsewhere).
EVAL_BUDGET = 10.0

MEMORIES: dict[str, str] = {
    # Chinese
    "z01": "部署脚本在 scripts/deploy.sh,上线前必须先跑一遍冒烟测试",
    "z02": "数据库每天凌晨三点自动备份到对象存储",
    "z03": "用户喜欢深色主题,编辑器字体用 JetBrains Mono",
    "z04": "代码缩进统一使用四个空格,不要用制表符",
    "z05": "生产环境的密钥放在 Vault 里,绝不能提交到仓库",
    "z06": "团队每周一上午十点开例会",
    "z07": "接口返回的时间一律使用 UTC 时间戳",
    "z08": "前端打包工具从 webpack 换成了 Vite,构建快了很多",
    "z09": "日志统一输出到 Elasticsearch,保留三十天",
    "z10": "合并请求至少需要一位同事审核通过",
    "z11": "测试覆盖率不能低于百分之八十",
    "z12": "这台电脑的内存只有十六 GB,不要同时开太多容器",
    "z13": "项目的 Python 版本固定为 3.11",
    "z14": "报错信息要写成中文,并附上修复建议",
    "z15": "缓存用 Redis,过期时间默认一小时",
    "z16": "周五下午不发布新版本",
    "z17": "用户养了一只猫,名字叫年糕",
    "z18": "公司 VPN 断线时先重启网络客户端再重新登录",
    "z19": "图片资源统一压缩成 WebP 格式",
    "z20": "新员工入职第一周要完成安全培训",
    "z21": "服务器在上海机房,访问延迟大约二十毫秒",
    # English
    "e01": "The deploy pipeline pushes container images to the registry.",
    "e02": "Run the unit tests before every commit.",
    "e03": "Production data lives in a PostgreSQL cluster.",
    "e04": "The team stand-up happens every morning at nine.",
    "e05": "Doctor visit on Monday afternoon.",
    "e06": "The office coffee machine is on the third floor.",
    "e07": "Use feature flags for every risky change so it can be switched off without a redeploy.",
    "e08": "The user prefers pnpm over npm for JavaScript projects.",
    "e09": "Our mobile app supports iOS 15 and newer only.",
    "e10": "Customer support tickets are handled in Zendesk.",
    "e11": "The staging server is reset every Sunday night.",
    "e12": "Alice owns the billing service; ask her before changing invoices.",
    "e13": "Passwords must be hashed with argon2, never stored in plain text.",
    "e14": "Load tests showed the API handles 2,000 requests per second.",
    "e15": "The design system uses an 8-pixel spacing grid.",
    "e16": "Translation strings live in locales/*.json and are edited through Crowdin.",
    "e17": "The user's daughter plays the violin.",
    "e18": "Rust code must pass clippy with no warnings.",
    "e19": "Meeting rooms are booked through the Outlook calendar.",
    "e20": "The CI runner has 2 CPU cores and 24 GB of memory.",
    "e21": "The electricity bill is paid automatically on the 15th of each month.",
    "e22": "Our GraphQL schema is generated from the TypeScript types.",
}


@dataclass(frozen=True)
class Query:
    text: str
    target: str | None  # the one right memory; None = nothing is relevant
    kind: str  # zh, en, zh-en, en-zh, none


def _q(kind: str, pairs: list[tuple[str, str | None]]) -> list[Query]:
    return [Query(text, target, kind) for text, target in pairs]


QUERIES: tuple[Query, ...] = tuple(
    _q(
        "zh",
        [
            ("发版前要验证什么", "z01"),
            ("资料库多久复制一份", "z02"),
            ("写程序时的配色偏好", "z03"),
            ("排版对齐用 tab 还是 space", "z04"),
            ("线上的口令凭据存哪", "z05"),
            ("组里定期碰头是哪天", "z06"),
            ("后端给出的日期用什么时区", "z07"),
            ("页面编译器选了谁", "z08"),
            ("运行记录存放多久", "z09"),
            ("代码合入要谁批准", "z10"),
            ("单元检验要达到多大比例", "z11"),
            ("机器运存够不够跑很多 docker", "z12"),
            ("宠物叫什么", "z17"),
            ("远程接入掉线怎么恢复", "z18"),
        ],
    )
    + _q(
        "en",
        [
            ("container release workflow", "e01"),
            ("check code before committing", "e02"),
            ("which database holds customer records", "e03"),
            ("daily meeting time", "e04"),
            ("physician appointment", "e05"),
            ("where can I get an espresso at work", "e06"),
            ("how to disable a new behaviour in production without shipping again", "e07"),
            ("which package manager for node", "e08"),
            ("minimum supported iPhone version", "e09"),
            ("where do help desk requests go", "e10"),
            ("when is the test environment wiped", "e11"),
            ("who is responsible for the payments backend", "e12"),
            ("how should user credentials be kept safe", "e13"),
            ("throughput benchmark results", "e14"),
        ],
    )
    + _q(
        "zh-en",
        [
            ("预发布环境什么时候清空", "e11"),
            ("用户的孩子学什么乐器", "e17"),
            ("会议室怎么预订", "e19"),
            ("持续集成机器的配置是多少", "e20"),
            ("电费怎么交", "e21"),
            ("接口模式是怎么生成的", "e22"),
            ("界面间距用什么规范", "e15"),
            ("多语言文案放在哪里", "e16"),
            ("看病的预约在哪天", "e05"),
        ],
    )
    + _q(
        "en-zh",
        [
            ("what time zone do API timestamps use", "z07"),
            ("how long are logs retained", "z09"),
            ("test coverage requirement", "z11"),
            ("interpreter version pinned for this repo", "z13"),
            ("language of error messages", "z14"),
            ("cache expiry default", "z15"),
            ("can we release on Friday afternoon", "z16"),
            ("image format for assets", "z19"),
            ("onboarding security training", "z20"),
            ("where is the server hosted", "z21"),
        ],
    )
    + _q(
        "none",
        [
            ("今天午饭吃什么", None),
            ("how tall is mount everest", None),
            ("明天会下雨吗", None),
            ("who won the 2018 world cup", None),
            ("推荐一部好看的电影", None),
            ("what is the capital of australia", None),
            ("怎么做红烧肉", None),
            ("best hiking trails near the lake", None),
            ("月亮离地球有多远", None),
            ("how do penguins keep warm", None),
            ("长城有多长", None),
            ("tips for growing tomatoes", None),
        ],
    )
)

_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")


def cjk_bigrams(text: str) -> set[str]:
    """Adjacent pairs of Han characters (an independent check, not the tokenizer under test)."""
    return {run[i : i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1)}


@dataclass
class Scores:
    """recall@5, recall@10 and MRR@10 over the answerable queries; results (top 5) for the `none` queries."""

    recall_at_5: float
    mrr: float
    false_positives: int
    none_queries: int
    answerable: int
    missed: list[str]
    recall_at_10: float = 0.0

    @property
    def fp_per_query(self) -> float:
        return self.false_positives / max(1, self.none_queries)

    def line(self, name: str) -> str:
        return (
            f"{name:<22} recall@5 {self.recall_at_5:.3f}  recall@10 {self.recall_at_10:.3f}  MRR@10 {self.mrr:.3f}  "
            f"nothing-relevant {self.false_positives} ({self.fp_per_query:.2f}/query over {self.none_queries})"
        )


def evaluate(results: dict[str, list[str]], ids: dict[str, str]) -> Scores:
    """Score `results` (query text → ranked record ids, ≥ 10 deep) against the table; `ids` maps key → record id.

    A nothing-relevant query counts what its top 5 returned (a search's default topK).
    """
    found5 = found10 = 0
    rr = 0.0
    fp = 0
    missed = []
    answerable = [q for q in QUERIES if q.target is not None]
    for q in QUERIES:
        got = results[q.text][:10]
        if q.target is None:
            fp += len(got[:5])
            continue
        want = ids[q.target]
        if want in got:
            found10 += 1
            found5 += got.index(want) < 5
            rr += 1.0 / (got.index(want) + 1)
        if want not in got[:5]:
            missed.append(f"{q.kind}:{q.text}")
    none = len(QUERIES) - len(answerable)
    n = len(answerable)
    return Scores(found5 / n, rr / n, fp, none, n, missed, found10 / n)


def bm25(ids: dict[str, str]) -> Scores:
    """The plain BM25 baseline (lowercase ``\\w+`` words) over the same memories."""
    from tests.helpers.conversation_corpus import bm25_ranking

    keys = list(MEMORIES)
    search = bm25_ranking([MEMORIES[k] for k in keys])
    return evaluate({q.text: [ids[keys[i]] for i in search(q.text)[:10]] for q in QUERIES}, ids)


def fill(store: SharedStore, scope: str = "global") -> dict[str, str]:
    """Save every memory; key → record id."""
    return {key: store.save(scope, text).record.id for key, text in MEMORIES.items()}


def run(
    store: SharedStore,
    ids: dict[str, str],
    channel: VectorChannel | None,
    scope: str = "global",
    *,
    dense: bool = False,
) -> Scores:
    """Every query through the hybrid ranking (lexical alone when `channel` is None).

    With `dense`, the vector channel alone: its candidates in the order of its own scores (the
    ranking over an empty query, so expiry and duplicates are handled as in a search).
    """
    from dsh_memory_mcp.search import scoring
    from dsh_memory_mcp.store.records import now_ms

    snaps = [store.snapshot(scope)]
    results = {}
    for q in QUERIES:
        scores = channel.query_scores(q.text, snaps, budget=EVAL_BUDGET) if channel is not None else None
        text = "" if dense else q.text
        hits = scoring.rank(snaps, text, top_k=10, now=now_ms(), vector_scores=scores)
        results[q.text] = [h.record.id for h in hits]
    return evaluate(results, ids)


def hybrid(store: SharedStore, ids: dict[str, str], settings: VectorSettings) -> tuple[Scores, dict[str, Any]]:
    """Start a vector channel on `settings`, embed the table, run the queries; (scores, channel stats)."""
    scores, _dense, stats = hybrid_and_dense(store, ids, settings)
    return scores, stats


def hybrid_and_dense(
    store: SharedStore, ids: dict[str, str], settings: VectorSettings
) -> tuple[Scores, Scores, dict[str, Any]]:
    """As `hybrid`, and the vector channel alone over the same embeddings: (hybrid, dense, stats)."""
    from dsh_memory_mcp.search.vectors import VectorChannel

    ch = VectorChannel(settings, store, load_timeout=60)
    store.on_delete = ch.on_delete
    ch.start()
    try:
        if not ch.wait_ready(60):
            raise RuntimeError(ch.status)
        # The table was saved before the channel started: the backfill embeds it, 16 per request.
        if not ch.wait_idle(300):
            raise RuntimeError(ch.status)
        return run(store, ids, ch), run(store, ids, ch, dense=True), ch.stats()
    finally:
        ch.close()
