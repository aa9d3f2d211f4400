"""The human command line in the user's language: Chinese by default, English when the locale asks.

Every text the CLI shows a person is written in Chinese and passed through `t` (formatted now) or
marked with `N_` (a constant translated where it is shown); `texts.EN`, the one table of every layer,
holds its English. The language comes from `config.ui_language`. What stays Chinese whatever the
locale: ``--json`` output, the log file, and the 已启动 marker of the success line.
"""

from __future__ import annotations

from collections.abc import Mapping

from dsh_memory_mcp import __version__, config, texts
from dsh_memory_mcp.cli.output import PROG

#: Fields every template may use without the caller passing them.
GLOBALS: Mapping[str, object] = {
    "prog": PROG,
    "version": __version__,
    "serve_port": config.DEFAULT_SERVE_PORT,
}


def english() -> bool:
    """Whether the human CLI speaks English now (the locale asks for ``en*``)."""
    return config.ui_language(config.environ()) == "en"


def N_(zh: str) -> str:
    """Mark a constant for translation; `t` translates it where it is shown."""
    return zh


def t(zh: str, /, **values: object) -> str:
    """`zh` (a Chinese template) in the user's language, with `values` (and `GLOBALS`) filled in.

    In English it is a `texts.Text` shown in English: a value that is a `Text` (a store error, a config
    warning…) too. The help text's English is `HELP_EN`.
    """
    fields = {**GLOBALS, **values}
    if not english():
        return zh.format_map(fields)
    return texts.msg(HELP_EN if zh == HELP_ZH else zh, **fields).english()


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
