"""The table of human subcommands (`COMMANDS`) and the guard each one runs in: settings resolved,
the body imported only when it runs (so ``--help`` stays light), Ctrl+C → 130, an unexpected error →
one line and exit 1. Adding one: AGENTS.md.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from typing import Protocol, TextIO, cast

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import diagnostics, logs
from dsh_memory_mcp.cli.messages import N_, shown, t
from dsh_memory_mcp.cli.output import EXIT_STARTUP, PipeSafe, describe, flush_std, harden, write_stderr_lines
from dsh_memory_mcp.cli.parser import Command, Invocation, Option

#: Exit code of a subcommand interrupted by Ctrl+C (the shell convention, 128 + SIGINT).
EXIT_INTERRUPTED = 130


class Body(Protocol):
    """A subcommand body: gets the invocation and the resolved settings, returns the exit code."""

    def __call__(self, invocation: Invocation, settings: config.Settings, *, out: TextIO, err: TextIO) -> int: ...


def _run_guarded(name: str, invocation: Invocation, load: Callable[[], Body]) -> int:
    """Resolve settings, import the body (`load`), run it; never a bare traceback."""
    debug = bool(config.read("DSH_MEMORY_DEBUG"))
    # A person's own command: no program prefix on its lines, no recover reminder on every run.
    logs.configure_stderr_logging(debug, logs.NoRecoverReminder(), prefix="")
    # A human command prints its own results; only the store's and vector channel's warnings
    # (corrupt lines, backend trouble) come through the logger.
    logs.log.setLevel(logging.DEBUG if debug else logging.WARNING)
    harden(sys.stdout)
    try:
        settings = config.resolve_settings(store_dir=invocation.store_dir, project_dir=invocation.project_dir)
        if settings.warnings:
            write_stderr_lines(["⚠️ " + shown(problem) for problem in settings.warnings], prefix="")
        try:
            body = load()
        except Exception as exc:
            raise diagnostics.ImportProblem(exc) from exc
        # `… | head`: a reader that leaves early must not turn the rest of the run into a crash.
        out = cast(TextIO, PipeSafe(sys.stdout))
        return body(invocation, settings, out=out, err=sys.stderr)
    except diagnostics.ImportProblem as problem:
        diagnostics.report_import_problem(problem, debug)
        return EXIT_STARTUP
    except KeyboardInterrupt:
        write_stderr_lines([t("已中断(Ctrl+C)")], prefix="")
        return EXIT_INTERRUPTED
    except Exception as exc:
        hint = "" if debug else t("(设 DSH_MEMORY_DEBUG=1 可看完整调用栈)")
        write_stderr_lines(
            [
                t("❌ {command} 失败:意外错误 {error}{hint}", command=name, error=describe(exc), hint=hint),
                *diagnostics.debug_lines(exc, debug),
            ],
            prefix="",
        )
        return EXIT_STARTUP
    finally:
        flush_std()
        logs.remove_handlers()


def _guarded(name: str, load: Callable[[], Body]) -> Callable[[Invocation], int]:
    def run(invocation: Invocation) -> int:
        return _run_guarded(invocation.command or name, invocation, load)

    return run


def _runner(name: str) -> Callable[[Invocation], int]:
    """A subcommand whose body is ``commands.run(name, …)`` (`dsh_memory_mcp.cli.commands`)."""

    def load() -> Body:
        from dsh_memory_mcp.cli import commands

        def body(invocation: Invocation, settings: config.Settings, *, out: TextIO, err: TextIO) -> int:
            return commands.run(name, invocation.args, invocation.options, settings, out=out, err=err)

        return body

    return _guarded(name, load)


def in_module(module: str, function: str = "main") -> Callable[[Invocation], int]:
    """A subcommand whose body is ``module.function(invocation, settings, *, out, err) -> int``,
    imported only when it runs (so ``--help`` and the server never load it)."""

    def load() -> Body:
        body: Body = getattr(importlib.import_module(module), function)
        return body

    return _guarded(module.rpartition(".")[2], load)


def _hook(invocation: Invocation) -> int:
    """`hook`: never a failure the host would show (exit 0 whatever happens); no SDK, no numpy with serve."""
    try:
        from dsh_memory_mcp.cli import hook

        return hook.main(invocation)
    except BaseException:  # a broken install must not fail the prompt either
        return 0


_JSON = Option(("--json",), "json", help=N_("输出 JSON(与 MCP 工具的 structuredContent 相同)而不是文本"))
_SCOPE = Option(
    ("--scope",),
    "scope",
    True,
    "SCOPE",
    N_("作用域:global / project / project:<路径> / session:<id> / 自定义名 / all"),
)
_PATH = Option(("--path",), "path", True, "DIR", N_("按工作区路径指定作用域(等价于 project:<路径>)"))
_KIND = Option(("--kind",), "kind", True, "KIND", N_("只看一种:fact / decision / preference / procedure / note / rule"))
_LIMIT = Option(("--limit",), "limit", True, "N", N_("最多显示几条,1~200(缺省 50),最新的在前"))
_CLIENT = Option(
    ("--client",), "client", True, "NAME", N_("只看该客户端写入的(客户端名,如 claude-code;--client=- 为手工保存的)")
)
_TOPK = Option(("--top-k", "--topk"), "top_k", True, "N", N_("最多返回几条,1~20(缺省 5)"))
_ID = Option(("--id",), "id", True, "ID", N_("要删除的记忆 id(完整 id 或至少 8 位前缀,任意作用域)"))
_CONFIRM = Option(("--confirm", "--yes"), "confirm", help=N_("--query 匹配超过阈值时确认删除(先不加它看预览)"))
_OFFSET = Option(
    ("--offset",),
    "offset",
    True,
    "N",
    N_("从内容的第几个字符起(缺省 0);一次最多给 20000 个字符,下一段的 --offset 写在输出末尾"),
)
_QUERY = Option(("--query",), "query", True, "TEXT", N_("删除内容包含该文本的记忆(只在一个作用域内,缺省当前项目)"))

_SAVE_KIND = Option(
    ("--kind",), "kind", True, "KIND", N_("种类:fact / decision / preference / procedure / note / rule(缺省 note)")
)
_TAGS = Option(("--tags",), "tags", True, "TAGS", N_("标签,逗号分隔(如 python,部署);最多 32 个,每个 ≤ 64 字"))
_IMPORTANCE = Option(("--importance",), "importance", True, "X", N_("重要度,0~1 之间的数字(缺省不写)"))
_SAVE_SCOPE = Option(
    ("--scope",),
    "scope",
    True,
    "SCOPE",
    N_("写入的作用域:global / project / project:<路径> / 自定义名(缺省同 memory_save)"),
)

_DRY_RUN = Option(("--dry-run",), "dry_run", help=N_("只打印将要做的修改(diff),不写任何文件"))
_SUPERSEDES = Option(
    ("--supersedes",), "supersedes", True, "ID", N_("取代这条记忆(id 或至少 8 位前缀):创建时间、使用次数与来源保留")
)
_LIST_OFFSET = Option(("--offset",), "offset", True, "N", N_("跳过最新的 N 条(翻页:输出末尾写着下一页的 --offset)"))
_SINCE = Option(("--since",), "since", True, "DATE", N_("只看这天以来更新的:YYYY-MM-DD(本地日期)或 7d(最近 7 天)"))
_LONG = Option(("--long",), "long", help=N_("项目写成完整路径(缺省只写文件夹名)"))
_HISTORY = Option(("--history",), "history", help=N_("同时列出每条记忆的各个版本(新 → 旧)"))
_PURGE = Option(("--purge",), "purge", help=N_("彻底删除,不经回收站(不能恢复)"))
_TRASH = Option(("--trash",), "trash", help=N_("回收站:列出人删除的记忆;给出 ID 则恢复它们(保留历史)"))
_EMPTY = Option(("--empty",), "empty", help=N_("与 --trash 同用:清空回收站(彻底删除,需 --yes 或在终端上回答 y)"))
_YES = Option(("--yes",), "confirm", help=N_("不再询问,确认清空回收站"))
_FORGET_DRY_RUN = Option(("--dry-run",), "dry_run", help=N_("只列出 --query 会删除哪些记忆,不删除"))
_NO_PAGER = Option(("--no-pager",), "no_pager", help=N_("不用分页程序(缺省:终端上比一屏长的结果交给 $PAGER,或 less)"))
_TO = Option(
    ("--to",), "to", True, "SCOPE", N_("目标作用域:global / project / 项目文件夹名 / project:<路径> / 自定义名")
)
_REMOVE = Option(("--remove",), "remove", help=N_("从宿主配置里移除 dsh-memory 条目"))
_URL = Option(
    ("--url",),
    "url",
    True,
    "URL",
    N_("写成 URL 条目,连接正在运行的 serve(如 http://127.0.0.1:{serve_port}/mcp)"),
)
_SERVE_SERVICE = Option(("--serve",), "serve", help=N_("把 serve 装成登录时自动启动的服务(与 --remove 合用则撤销)"))
_SERVE_OPTIONS = (
    Option(("--host",), "host", True, "HOST", N_("监听地址(缺省 127.0.0.1;非回环地址必须设 DSH_MEMORY_TOKEN)")),
    Option(("--port",), "port", True, "N", N_("监听端口(缺省 {serve_port};0 = 任取一个空闲端口)")),
    Option(("--new-token",), "new_token", help=N_("换一个新令牌(旧令牌立即失效),之后重启照样沿用新令牌")),
)


def _serve(invocation: Invocation) -> int:
    """`serve` owns its process (logging at INFO, signals, the SDK): not the human-command guard."""
    from dsh_memory_mcp.cli import serve

    return serve.run(invocation)


_SCOPE_NOTE = N_("--scope 与 --path 的规则与 MCP 工具的 scope / path 参数完全相同(见 README「作用域」)。")

#: The built-in subcommands, in the order ``--help`` lists them. Adding one: a `Command` here whose
#: `run` is `_runner(name)` (a body in `commands.py`) or `in_module("dsh_memory_mcp.cli.x")`.
_BUILTIN: tuple[Command, ...] = (
    Command(
        "list",
        N_("列出记忆(最新在前)"),
        _runner("list"),
        extra_options=(_SCOPE, _PATH, _KIND, _LIMIT, _LIST_OFFSET, _SINCE, _CLIENT, _LONG, _NO_PAGER, _JSON),
        usage=(
            "list [--scope SCOPE | --path DIR] [--kind KIND] [--limit N] [--offset N] [--since DATE] [--client NAME]"
            " [--long] [--json]",
        ),
        details=(
            N_("与 memory_list 工具相同:缺省列出当前项目 + global 的有效记忆(过期/被取代的不显示)。\n"),
            _SCOPE_NOTE,
        ),
    ),
    Command(
        "save",
        N_("保存一条记忆(与 memory_save 相同)"),
        _runner("save"),
        accepts_args=True,
        extra_options=(_SAVE_KIND, _TAGS, _SAVE_SCOPE, _PATH, _IMPORTANCE, _SUPERSEDES, _JSON),
        usage=(
            N_('save "内容" [--kind KIND] [--tags a,b] [--scope SCOPE | --path DIR] [--importance X] [--json]'),
            N_('save "新内容" --supersedes ID …'),
            N_("save - [--kind KIND] …  < 文件"),
        ),
        details=(
            N_(
                "与 memory_save 工具相同的检查、错误码和作用域规则(同一个函数)。成功时 stdout 只打印新记忆的完整 id\n"
                "(--json:与工具相同的结构化结果),stderr 打印工具的那句话;内容已存在时打印已有记忆的 id。\n"
                '内容为 - 时从标准输入读(UTF-8);以 - 开头的内容写在 -- 之后:save -- "-5 度以下不跑步"。\n'
                "退出码:0 已保存(或已存在),2 参数错误(缺内容、多余参数、"
                "--kind/--tags/--importance/--scope 的值不合规),\n"
                "3 内容被拒绝(CONTENT_EMPTY、CONTENT_TOO_LONG、CONTENT_SECRET:原样再试也会被拒),"
                "1 其它失败(记忆库、锁)。\n"
            ),
            _SCOPE_NOTE,
        ),
    ),
    Command(
        "search",
        N_("检索记忆"),
        _runner("search"),
        accepts_args=True,
        extra_options=(_SCOPE, _PATH, _TOPK, _LONG, _NO_PAGER, _JSON),
        usage=(N_("search 查询词… [--scope SCOPE | --path DIR] [--top-k N] [--long] [--json]"),),
        details=(
            N_(
                "与 memory_search 工具相同(多个词用空格连成一句查询)。向量检索只用已在运行的嵌入服务\n"
                "(DSH_MEMORY_EMBED_ENDPOINT,或端口上已在运行的 llama-server),从不为一次检索拉起 llama-server;\n"
                "后端没就绪就只用词法检索。命中会像工具一样累加 accessCount。\n"
            ),
            _SCOPE_NOTE,
        ),
    ),
    Command(
        "get",
        N_("按 id 取完整记忆"),
        _runner("get"),
        accepts_args=True,
        extra_options=(_OFFSET, _HISTORY, _LONG, _NO_PAGER, _JSON),
        usage=("get ID [ID …] [--offset N] [--history] [--long] [--json]",),
        details=N_("与 memory_get 工具相同:完整 id 或至少 8 位前缀,任意作用域,过期记录也能取到。"),
    ),
    Command(
        "forget",
        N_("删除记忆"),
        _runner("forget"),
        accepts_args=True,
        extra_options=(_ID, _QUERY, _SCOPE, _PATH, _CONFIRM, _FORGET_DRY_RUN, _PURGE, _JSON),
        usage=(
            "forget ID [--purge] [--json]",
            "forget --id ID [--purge] [--json]",
            N_("forget --query 文本 [--scope SCOPE | --path DIR] [--dry-run | --yes] [--purge] [--json]"),
        ),
        details=N_(
            "与 memory_forget 工具相同:按 id 删一条(任意作用域),或按内容子串在一个作用域内批量删除\n"
            "(缺省当前项目;不能用 all)。--query 先列出匹配的记忆;--dry-run 到此为止。匹配多于 1 条时\n"
            "需要 --yes(在终端上也可以回答 y),否则什么都不删并以 1 退出;确认后删除那时仍匹配的记忆。\n"
            "删除的记忆移到回收站,保留 DSH_MEMORY_TRASH_DAYS 天(缺省 30),recover --trash 查看与恢复;\n"
            "--purge 不经回收站、彻底删除。"
        ),
    ),
    Command(
        "edit",
        N_("修改一条记忆(写新版本取代旧的,保留创建时间、使用次数与来源)"),
        _runner("edit"),
        accepts_args=True,
        extra_options=(_SAVE_KIND, _TAGS, _IMPORTANCE, _JSON),
        usage=(N_('edit ID ["新内容" | -] [--kind KIND] [--tags a,b] [--importance X] [--json]'),),
        details=N_(
            "没给的字段沿用原记忆。与网页的「保存修改」相同:memory_save 加 supersedes,旧版本留在磁盘上,\n"
            "get ID --history 列出各个版本。stdout 打印新记忆的 id;退出码同 save。"
        ),
    ),
    Command(
        "move",
        N_("把一条记忆移到另一个作用域(保留历史)"),
        _runner("move"),
        accepts_args=True,
        extra_options=(_TO, _JSON),
        usage=("move ID --to SCOPE [--json]",),
        details=N_(
            "在目标作用域写一条新版本并取代原记录(与 edit 同一机制),创建时间、使用次数与来源保留。\n"
            "项目可以用文件夹名(如 --to atlas-web),多个项目同名时报错并列出候选。"
        ),
    ),
    Command(
        "export",
        N_("导出全部记忆为 JSONL(stdout)"),
        _runner("export"),
        extra_options=(_SCOPE, _PATH),
        usage=("export [--scope SCOPE | --path DIR] > backup.jsonl",),
        details=N_(
            "每个作用域的每条记录(含已过期/被取代的)按磁盘上的原样输出一行,是无损备份,可用 import 恢复。\n"
            "解析不了的损坏行不导出(仍留在记忆库文件里),数目报告在 stderr。缺省导出所有作用域。"
        ),
    ),
    Command(
        "import",
        N_("从 JSONL 导入记忆"),
        _runner("import"),
        accepts_args=True,
        extra_options=(
            _SCOPE,
            _PATH,
            Option(("--dry-run",), "dry_run", help=N_("只报告会导入什么,不写任何文件")),
        ),
        usage=("import FILE [--scope SCOPE | --path DIR] [--dry-run]", "import - < backup.jsonl"),
        details=N_(
            "逐行自动识别两种格式:\n"
            "  1. 本服务 export 的记录行:原样写回它自己的作用域(id 与所有字段保留);\n"
            "     id 已存在、或同一作用域已有相同内容的有效记忆 → 记为「已存在」,不重复写入。\n"
            '  2. 官方 MCP memory 服务器的知识图谱 JSONL({{"type":"entity",…}} / {{"type":"relation",…}}):\n'
            "     每条 observation 成为一条记忆「<name>: <observation>」"
            "(kind=fact,tags=[entityType, mcp-memory-import]),\n"
            "     每条关系成为一条记忆「<from> <relationType> <to>」(kind=fact,tags=[relation, mcp-memory-import]),\n"
            "     写入 --scope / --path 指定的作用域(缺省 global)。\n"
            "无效行在 stderr 报出行号并跳过,不影响其它行。FILE 为 - 时读标准输入。\n"
            "--dry-run:只报告会新增、已存在、跳过和拒绝多少,不写任何文件(也不创建记忆库目录)。"
        ),
    ),
    Command(
        "stats",
        N_("记忆库统计:每个作用域的记录数、过期数、损坏行、文件大小、向量"),
        _runner("stats"),
        extra_options=(_SCOPE, _PATH, _NO_PAGER, _JSON),
        usage=("stats [--scope SCOPE | --path DIR] [--json]",),
        details=N_("缺省统计磁盘上的所有作用域。只读:不加锁、不写任何文件、不连嵌入服务。"),
    ),
    Command(
        "reembed",
        N_("用当前嵌入模型重建向量边车(.vec)"),
        _runner("reembed"),
        accepts_args=True,
        extra_options=(_SCOPE, _PATH),
        usage=("reembed [SCOPE …] [--scope SCOPE | --path DIR]",),
        details=N_(
            "为每条有效记录重新计算向量并整份重写 .vec(缺省所有作用域),进度条输出到 stderr。\n"
            "需要可用的向量后端(DSH_MEMORY_EMBED_ENDPOINT,或 DSH_MEMORY_EMBED_MODEL + llama-server;\n"
            "后者没在运行时会临时拉起,结束时停掉)。"
        ),
    ),
    Command(
        "setup",
        N_("为各宿主(Claude Code、Cursor、VS Code、Codex、Trae、ZCode…)写入 MCP 配置"),
        in_module("dsh_memory_mcp.cli.setup"),
        accepts_args=True,
        extra_options=(_DRY_RUN, _REMOVE, _URL, _SERVE_SERVICE),
        usage=("setup [HOST …] [--dry-run] [--remove] [--url URL]", "setup --serve [--remove] [--dry-run]"),
        details=N_(
            "HOST:claude-code claude-desktop cursor vscode codex trae workbuddy zcode;\n"
            "不写就是本机发现的全部宿主。写入本程序的绝对路径和 --store-dir(缺省:沿用其它宿主已配的目录,\n"
            "否则 ~/.dsh-memory-store),不写 --project。只改 dsh-memory 这一条,其它内容逐字节保留;\n"
            "改之前先备份(<文件>.dsh-memory-mcp-<时间>.bak);再运行一次不改任何东西。--remove 原样撤销。\n"
            "--url:写成连接正在运行的 serve 的 URL 条目(带 Authorization: Bearer 令牌,令牌取自 <store>/serve.json\n"
            "或 DSH_MEMORY_TOKEN,或 serve 为这个存储目录保存的令牌;文件改为 0600),写之前向那个地址发一次 /health\n"
            "核对地址和令牌,不对就 ⚠️;不支持 URL 的宿主照旧写 stdio 命令(它会自动中继到 serve)。\n"
            "--serve:把 serve --store-dir <存储目录> 装成登录时自动启动的服务(Linux systemd 用户服务、\n"
            "macOS launchd、Windows 任务计划程序),--serve --remove 撤销。"
        ),
    ),
    Command(
        "recover",
        N_("恢复被不加锁的写入者覆盖掉的记忆(按写入日志原样恢复)"),
        _runner("recover"),
        accepts_args=True,
        extra_options=(
            Option(("--dry-run",), "dry_run", help=N_("只列出会恢复哪些记忆,不写任何文件")),
            _SCOPE,
            _PATH,
            _TRASH,
            _EMPTY,
            _YES,
            _LONG,
            _NO_PAGER,
            _JSON,
        ),
        usage=(
            "recover [--dry-run] [--scope SCOPE | --path DIR] [--json]",
            "recover --trash [ID …] [--json]",
            "recover --trash --empty [--yes] [--json]",
        ),
        details=N_(
            "本服务每次确认的保存、取代、删除都先记入记忆库里的写入日志(.journal/)。不加锁、整份重写文件的\n"
            "写入者(如用旧快照覆盖文件的 DSH 插件)可能把它们抹掉;recover 在作用域锁内把「确认保存过、从未被本服务\n"
            "删除或取代、如今不在文件里」的记录按写入时的原样追加回去。被删除或取代的记录永远不会被带回。\n"
            "缺省处理所有作用域。stats 与 doctor 会报告有多少条可恢复。\n"
            "--trash:人(网页、forget 命令)删除的记忆在回收站里保留 DSH_MEMORY_TRASH_DAYS 天;recover --trash\n"
            "列出它们,recover --trash ID … 恢复(创建时间、使用次数与来源保留),--empty 清空。"
        ),
    ),
    Command(
        "serve",
        N_("一个进程为多个宿主提供 MCP(Streamable HTTP,/mcp)"),
        _serve,
        extra_options=_SERVE_OPTIONS,
        usage=("serve [--host 127.0.0.1] [--port {serve_port}] [--new-token]",),
        details=N_(
            "一个进程、一份缓存、一个记忆库视图,所有会话共享:一个会话保存的记忆其它会话立刻可见。\n"
            "每个请求都要 Authorization: Bearer <令牌>:DSH_MEMORY_TOKEN;没设就用 serve 为这个存储目录保存的令牌\n"
            "(用户状态目录下 serve-tokens/,0600;第一次启动时生成,重启后不变,--new-token 换一个),\n"
            "也写在 <存储目录>/serve.json(0600,退出时删除)。端口缺省固定为 "
            "{serve_port},所以 setup --url 写下的配置在 serve 重启后照样能用。\n"
            "同一个存储目录只能有一个 serve。setup --serve 把它装成登录时自动启动的服务。\n"
            "只会 stdio 的宿主照常启动 dsh-memory-mcp,它发现 serve.json 就把会话转发过来。\n"
            "环境变量:DSH_MEMORY_TOKEN、DSH_MEMORY_ALLOWED_HOSTS、DSH_MEMORY_ALLOWED_ORIGINS、\n"
            "DSH_MEMORY_SESSION_IDLE_SECS(600)、DSH_MEMORY_MAX_TOOL_CALLS(16)、DSH_MEMORY_TOOL_DEADLINE_SECS(300)。\n"
            "SIGINT / SIGTERM:正在运行的工具调用最多再等 10 秒,然后退出(0)。"
        ),
    ),
    Command(
        "web",
        N_("打印网页的一次性登录链接(需要 serve 在运行)"),
        in_module("dsh_memory_mcp.cli.serve", "login_link"),
        usage=("web",),
        details=N_(
            "向本记忆库正在运行的 serve 要一个一次性登录码,把网页链接(http://127.0.0.1:<端口>/#code=…)打印到 stdout。\n"
            "链接只能用一次,10 分钟内有效,里面没有令牌;打开后网页登录保持 DSH_MEMORY_WEB_LOGIN_SECS(缺省 7 天)\n"
            "或到 serve 停止。serve 作为服务运行、看不到它的输出时用它。"
        ),
    ),
    Command(
        "doctor",
        N_("检查安装、配置、记忆库与向量后端"),
        _runner("doctor"),
        usage=("doctor",),
        details=N_("只读:不建目录、不写文件、不启动进程。有问题时退出码 1。"),
    ),
    Command(
        "hook",
        N_("宿主钩子:会话开始时给出记忆摘要,每次提问时给出相关记忆(setup 会安装)"),
        _hook,
        accepts_args=True,
        usage=("hook session-start|prompt  < HOOK-JSON",),
        details=N_(
            "宿主(Claude Code、Gemini CLI、Cursor)在会话开始与每次提问时运行它,JSON 从标准输入读,\n"
            "输出宿主加进模型上下文的内容:会话开始时是记忆摘要,提问时是与提问相关、本会话还没给过的记忆\n"
            "(当前项目 + global,最多 DSH_MEMORY_HOOK_BUDGET 个字符)。有运行中的 serve 就问它,否则直接读记忆库。\n"
            "任何问题(输入不对、记忆库不可用、超时)都以退出码 0 结束,什么也不输出;注入了哪些记忆(只有 id)写进日志文件。"
        ),
    ),
    Command(
        "duplicates",
        N_("列出内容几乎相同的记忆(与网页「重复的记忆」相同)"),
        _runner("duplicates"),
        extra_options=(_SCOPE, _PATH, _LONG, _NO_PAGER, _JSON),
        usage=("duplicates [--scope SCOPE | --path DIR] [--long] [--json]",),
        details=N_(
            "与网页「重复的记忆」同一个函数:每个作用域里用词几乎相同的有效记忆成组列出(新 → 旧),缺省所有作用域。\n"
            "只读:保留一条、替换其余在网页上做(可恢复),或用 edit / save --supersedes / forget。"
        ),
    ),
)

#: Registry of human subcommands: name → `Command`. The parser and ``--help`` read it.
COMMANDS: dict[str, Command] = {command.name: command for command in _BUILTIN}
