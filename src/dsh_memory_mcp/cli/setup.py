"""`dsh-memory-mcp setup [HOST…] [--dry-run] [--remove] [--url URL]` and `setup --serve`.

Writes our entry (this executable's absolute path and ``--store-dir <store>``, never ``--project``)
into each host's user-level config file, and our hooks into the hook files of `hosts.HOOK_FILES`.
With no HOST, every host found on this machine. The rules are docs/design.md's "Host configs".
"""

from __future__ import annotations

import datetime
import difflib
import os
import shutil
import sys
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import confedit, hosts, hostwrite
from dsh_memory_mcp.cli.hosts import SERVER_NAME, Host
from dsh_memory_mcp.cli.messages import N_, t
from dsh_memory_mcp.cli.output import EXIT_OK, EXIT_USAGE, PROG
from dsh_memory_mcp.cli.parser import Invocation, control_char
from dsh_memory_mcp.store import fileio

EXIT_FAIL = 1
TOKEN_ENV = "DSH_MEMORY_TOKEN"
MASK = N_("<令牌已隐藏>")


@dataclass(frozen=True)
class Outcome:
    """What `plan` decided for one file: its text before and after (None: does not exist), and
    our entry as it should then read (None: removed)."""

    before: str | None
    after: str
    bom: bool = False
    entry: Any = None


def main(invocation: Invocation, settings: config.Settings, *, out: TextIO, err: TextIO) -> int:
    """Run `setup`; 0 when every file is as asked, 1 when one could not be written, 2 usage."""
    env: Mapping[str, str] = config.environ()
    platform = sys.platform
    options = invocation.options
    dry_run = options.get("dry_run") is True
    remove = options.get("remove") is True
    url_option = options.get("url")
    url = url_option if isinstance(url_option, str) else None
    chosen: list[Host] = []
    for word in invocation.args:
        host = hosts.by_name(word)
        if host is None:
            names = " ".join(h.id for h in hosts.HOSTS)
            return _usage(err, t("❌ 参数错误:不认识的宿主 {word}(可选:{names})", word=word, names=names))
        if host not in chosen:
            chosen.append(host)
    if url is not None and not _valid_url(url):
        return _usage(
            err, t("❌ 参数错误:--url {url} 不是 http(s) 地址(应形如 http://127.0.0.1:{serve_port}/mcp)", url=url)
        )
    if options.get("serve") is True:
        if url is not None or chosen:
            return _usage(err, t("❌ 参数错误:--serve 只安装登录时启动的 serve,不能同时给宿主或 --url"))
        return setup_service(invocation, settings, env, platform, dry_run=dry_run, remove=remove, out=out, err=err)
    targets: list[tuple[Host, str]] = []
    missing: list[Host] = []
    for host in chosen or list(hosts.HOSTS):
        paths = hosts.found(host, env, platform)
        if not paths and chosen:
            paths = [hosts.candidates(host, env, platform)[0][0]]
        if not paths:
            missing.append(host)
        targets.extend((host, path) for path in paths)

    head = t("(预演:--dry-run,不写任何文件)") if dry_run else ""
    token: str | None = None
    command, args = launch_command()
    if remove:
        out.write(t("{prog} setup --remove:从各宿主配置里移除 {name} 条目{head}", name=SERVER_NAME, head=head) + "\n")
    else:
        store, why = choose_store(invocation, settings, env, platform)
        if _refuse_controls(err, store, why, command, url or ""):
            return EXIT_USAGE
        args = [*args, "--store-dir", store]
        out.write(t("{prog} setup:为各宿主写入 {name} 条目{head}", name=SERVER_NAME, head=head) + "\n")
        out.write(t("  命令:{argv}\n", argv=_command_line([command, *args])))
        out.write(t("  存储目录:{store}({why})\n", store=store, why=why))
        if _ephemeral(command):
            out.write(
                t(
                    "  ⚠️ {command} 在 uv 的缓存里(uvx 的临时环境),清缓存后就没了;建议 pipx install 后再运行 setup,"
                    '或手动写 "command": "uvx", "args": ["--from", "<源码目录或 git 地址>", "{prog}", …]\n',
                    command=command,
                )
            )
        if url is not None:
            token, source = find_token(store, env)
            out.write(f"  URL:{url}" + (t("(令牌取自 {source})", source=source) if token else "") + "\n")
            if token is None:
                out.write(
                    t(
                        "  ⚠️ 没有令牌:{store}/serve.json 不可用,DSH_MEMORY_TOKEN 也没设,"
                        "serve 也还没为这个存储目录保存过令牌;URL 条目不带 Authorization 头"
                        " ⇒ 先运行一次 {prog} serve --store-dir {store}\n",
                        store=store,
                    )
                )
            for line in check_url(url, store, token):
                out.write(f"  {line}\n")
    if not targets:
        out.write(
            t(
                "没有发现已安装的宿主({names});指名就会写入,例如 {prog} setup cursor\n",
                names=t("、").join(h.name for h in missing),
            )
        )
        return EXIT_FAIL
    failed = 0
    for host, path in targets:
        ours: dict[str, Any] | None = None
        note = ""
        if not remove:
            ours = hosts.url_entry(host, url, token) if url is not None else None
            if ours is None:
                ours = hosts.stdio_entry(host, command, args)
                if url is not None:
                    note = t("(它的配置文件不支持 URL 条目,写的是 stdio 命令;serve 在运行时这条命令会自动中继过去)")
        secret = token is not None and ours is not None and token in repr(ours)
        failed += not _entry(host, path, ours, note, out, token=token, secret=secret, dry_run=dry_run)
    done_hooks: set[str] = set()
    for host, _path in targets:
        if host.id not in done_hooks and hosts.hook_file(host) is not None:
            done_hooks.add(host.id)
            argv = None if remove else [os.path.abspath(sys.executable), "-m", "dsh_memory_mcp.cli.hook", *args[-2:]]
            failed += not _hooks(host, hosts.hook_path(host, env, platform), argv, out, dry_run=dry_run)
    for host in missing:
        marker = hosts.candidates(host, env, platform)[0][1]
        out.write(
            t(
                "⏭ {host}:没有发现({marker} 不存在),跳过;要写入就指名:{prog} setup {id}\n",
                host=host.name,
                marker=marker,
                id=host.id,
            )
        )
    out.flush()
    return EXIT_FAIL if failed else EXIT_OK


def _usage(err: TextIO, line: str) -> int:
    err.write(f"[{PROG}] {line}\n")
    return EXIT_USAGE


def _entry(
    host: Host,
    path: str,
    ours: Mapping[str, Any] | None,
    note: str,
    out: TextIO,
    *,
    token: str | None,
    secret: bool,
    dry_run: bool,
) -> bool:
    """Write (or, `ours` None, remove) our entry in one config file and say how it went; False when it
    failed. `secret`: the entry holds `token` (the file becomes 0600); a diff masks `token`."""
    about = {"host": host.name, "path": path}
    unchanged = t("没有 dsh-memory 条目,无需移除") if ours is None else t("已是最新,未改动")
    try:
        outcome, written = _apply(path, lambda read: plan(host, read, ours), secret=secret, dry_run=dry_run)
    except hostwrite.Busy as exc:
        out.write(t("❌ {host}:{path} {problem} ⇒ 关掉 {host} 后再运行一次\n", problem=exc, **about))
        return False
    except hostwrite.ForeignOwner as exc:
        out.write(t("❌ {host}:{path} {problem},没有改动 ⇒ 以文件主人的身份运行 {prog} setup\n", problem=exc, **about))
        return False
    except (OSError, ValueError) as exc:
        if isinstance(exc, OSError) and not dry_run:
            out.write(t("❌ {host}:写 {path} 失败({problem}),原文件未动\n", problem=exc.strerror or exc, **about))
        else:
            out.write(t("❌ {host}:{path} {problem},没有改动\n", problem=hosts.describe_problem(exc), **about))
        return False
    if written is None:
        if outcome.after == (outcome.before or ""):
            out.write(f"= {host.name}:{path} {unchanged}\n")
        else:
            out.write(t("~ {host}:{path} 将被修改{note}:\n", note=note, **about))
            out.write(_diff(path, outcome, token))
        return True
    if not written.changed:
        out.write(f"= {host.name}:{path} {unchanged}\n")
        return True
    redone = t("(写入时 {host} 改写了 {n} 次,已按它的最新内容重做)", host=host.name, n=written.restarts)
    redone = redone if written.restarts else ""
    if not _entry_as_planned(host, written.after, outcome):
        what = t("dsh-memory 条目又回来了") if ours is None else t("dsh-memory 条目没有留下")
        out.write(
            t(
                "⚠️ {host}:{path} 写入后立刻被 {host} 整份改写,{what}{redone} ⇒ 关掉 {host} 后再运行一次 {prog} setup\n",
                what=what,
                redone=redone,
                **about,
            )
        )
        return False
    done = t("已移除 dsh-memory") if ours is None else t("已写入")
    restart = t(host.restart)
    out.write(
        t(
            "✅ {host}:{done} {path}{saved}{redone}{note} ⇒ {restart}后生效\n",
            done=done,
            saved=_saved(written),
            redone=redone,
            note=note,
            restart=restart,
            **about,
        )
    )
    return True


# --------------------------------------------------------------------------------------------
# Deciding what to write
# --------------------------------------------------------------------------------------------


def launch_command() -> tuple[str, list[str]]:
    """How a host should start *this* installation: the console script's absolute path, or (run as
    ``python -m dsh_memory_mcp``) this interpreter with ``-m dsh_memory_mcp``. Never resolves
    symlinks: a venv's ``bin/python`` is a link whose target does not see the venv."""
    argv0 = sys.argv[0] if sys.argv else ""
    base = os.path.basename(argv0).lower()
    for suffix in (".exe", "-script.py", ".py"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    if base == PROG:
        for candidate in (argv0, argv0 + ".exe", shutil.which(argv0) or ""):
            if candidate and os.path.isfile(candidate):
                return os.path.abspath(candidate), []
    return os.path.abspath(sys.executable), ["-m", "dsh_memory_mcp"]


def _ephemeral(command: str) -> bool:
    """Is `command` inside uv's cache (what `uvx` runs from), which `uv cache clean` deletes?"""
    parts = [p.lower() for p in command.replace("\\", "/").split("/")]
    return "uv" in parts and any(p.startswith(("archive-v", "builds-v", "environments-v")) for p in parts)


def choose_store(
    invocation: Invocation, settings: config.Settings, env: Mapping[str, str], platform: str
) -> tuple[str, str]:
    """The store to write, and why: the flag, the env var, the one other hosts already use, the default."""
    if invocation.store_dir is not None:
        return settings.store_dir, "--store-dir"
    if (env.get("DSH_MEMORY_STORE_DIR") or "").strip():
        return settings.store_dir, t("环境变量 DSH_MEMORY_STORE_DIR")
    entries, _ = hosts.configured(env, platform)
    stores = Counter(hosts.normal_path(e.store) for e in entries if e.store)
    if len(stores) == 1:
        return next(iter(stores)), t("沿用已配置宿主里的存储目录")
    differ = (
        t(";已配置的宿主用了不同的存储目录:{stores},建议用 --store-dir 统一", stores=t("、").join(stores))
        if stores
        else ""
    )
    if os.path.isfile(os.path.join(settings.store_dir, "global.jsonl")):
        return settings.store_dir, t("缺省目录,里面已有记忆 global.jsonl") + differ
    return (
        settings.store_dir,
        t("缺省目录,还没有记忆文件;若 DSH 记忆插件的 storeDir 不在这里,用 --store-dir 指定") + differ,
    )


def find_token(store: str, env: Mapping[str, str]) -> tuple[str | None, str]:
    """The bearer token for `--url`: a trustworthy ``<store>/serve.json`` of a live serve, else
    ``$DSH_MEMORY_TOKEN``, else the token serve keeps for this store across restarts."""
    from dsh_memory_mcp.cli import serve_token
    from dsh_memory_mcp.transports import serve_file  # stdlib only

    info, _why = serve_file.read(store)
    if info is not None and info.alive and info.token:
        return info.token, serve_file.path_for(store)
    token = (env.get(TOKEN_ENV) or "").strip()
    if token:
        return token, TOKEN_ENV
    kept, _why = serve_token.read(store)
    if kept is not None:
        return kept, serve_token.path_for(store)
    return None, ""


def check_url(url: str, store: str, token: str | None) -> list[str]:
    """Lines about `url` against the running serve of `store` (its ``serve.json``) and a real
    ``GET /health`` there with `token`: ⚠️ when a host with this entry would not get through."""
    from dsh_memory_mcp.cli import probe
    from dsh_memory_mcp.transports import serve_file

    lines = []
    info, _why = serve_file.read(store)
    running = info if info is not None and info.alive else None
    if running is not None and not probe.same_serve(url, running.url):
        lines.append(
            t(
                "⚠️ 这个存储目录的 serve 正在 {actual} 运行(pid {pid}),不是 --url 的 {url}:宿主会连不上"
                " ⇒ 改用 --url {actual}",
                actual=running.url,
                pid=running.pid,
                url=url,
            )
        )
    answer = probe.health(url, {"Authorization": f"Bearer {token}"} if token else {})
    if answer.state == "ok":
        lines.append(
            t("✅ 已验证:{url} 上的 serve(v{version})接受这个令牌", url=url, version=answer.data.get("version"))
        )
    elif answer.state == "unauthorized":
        lines.append(
            t(
                "⚠️ {url} 上的 serve 不接受这个令牌({detail}):它用的是别的令牌(另一个存储目录的 serve,"
                "或设了 DSH_MEMORY_TOKEN)⇒ 用同一个 --store-dir,或带上同样的 DSH_MEMORY_TOKEN 再运行 setup --url",
                url=url,
                detail=answer.detail,
            )
        )
    elif answer.state == "down":
        lines.append(
            t(
                "⚠️ {url} 现在没有 serve 在应答;条目照样写入,serve 启动后即可用(令牌重启后不变)"
                " ⇒ {prog} serve --store-dir {store},或 {prog} setup --serve 让它登录时自动启动",
                url=url,
                store=store,
            )
        )
    else:
        lines.append(t("⚠️ {url} 上应答的不是 dsh-memory-mcp serve({detail})", url=url, detail=answer.detail))
    return lines


def _valid_url(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _without_ours(host: Host, document: Any) -> Any:
    """The document minus our entry, with the server object and its parents dropped where that leaves them empty."""
    if not isinstance(document, dict):
        return document
    copy: dict[str, Any] = dict(document)
    chain = [copy]
    for key in host.table:
        child = chain[-1].get(key)
        if not isinstance(child, dict):
            break
        child = dict(child)
        chain[-1][key] = child
        chain.append(child)
    else:
        chain[-1].pop(SERVER_NAME, None)
    # An empty parent (`"mcp": {}` before we add `servers` in it) is the same as none.
    for depth in range(len(chain) - 1, 0, -1):
        if chain[depth]:
            break
        del chain[depth - 1][host.table[depth - 1]]
    return copy


def _ours(host: Host, document: Any) -> Any:
    return hosts.servers(host, document).get(SERVER_NAME)


def plan(host: Host, read: tuple[str, bool] | None, ours: Mapping[str, Any] | None) -> Outcome:
    """A config file's (text, BOM) as read (None: no file) with our entry set to `ours` (merged with
    what the user added), or removed (`ours` None). Raises ValueError (incl.
    `confedit.ConfigSyntaxError`) when the file cannot be edited safely."""
    before, bom = read if read is not None else (None, False)
    text = before or ""
    old_doc = hosts.load(host, text)
    current = _ours(host, old_doc)
    entry = None if ours is None else hosts.merged(host, current, ours)
    if entry is not None and current == entry:
        return Outcome(before, text, bom, entry)
    if host.format == "toml":
        key = (*host.table, SERVER_NAME)
        after = confedit.toml_remove_table(text, key) if entry is None else confedit.toml_set_table(text, key, entry)
    elif entry is None:
        after = confedit.json_remove(text, host.table, SERVER_NAME)
    else:
        after = confedit.json_set(text, host.table, SERVER_NAME, entry)
    if after == text:
        if entry is not None or current is not None:
            raise ValueError(t("里的 {name} 条目写法我们改不了,请手动修改", name=SERVER_NAME))
        return Outcome(before, text, bom, entry)
    new_doc = hosts.load(host, after)
    if _without_ours(host, new_doc) != _without_ours(host, old_doc) or _ours(host, new_doc) != entry:
        hint = (
            t("请手动删除 {name} 条目", name=SERVER_NAME)
            if entry is None
            else t("请手动加入 {name} 条目", name=SERVER_NAME)
        )
        raise ValueError(t("的写法我们没法安全修改(改完再读,其它内容或我们的条目不对),{hint}", hint=hint))
    return Outcome(before, after, bom, entry)


# --------------------------------------------------------------------------------------------
# Writing and showing
# --------------------------------------------------------------------------------------------


def _apply(
    path: str, plan: Callable[[tuple[str, bool] | None], Outcome], *, secret: bool, dry_run: bool
) -> tuple[Outcome, hostwrite.Replaced | None]:
    """`plan` one file and (unless `dry_run`: then no `Replaced`) write it as a compare-and-swap
    (`hostwrite.replace_config`): planned again from the newest bytes whenever the host changed the
    file, the old bytes backed up, owner, group and mode kept. Raises what `replace_config` raises."""
    if dry_run:
        return plan(hosts.read_config(path)), None
    planned: list[Outcome] = []

    def make(raw: bytes | None) -> bytes | None:
        outcome = plan(hosts.decode_config(raw) if raw is not None else None)
        planned.append(outcome)
        if outcome.after == (outcome.before or ""):
            return None
        return (b"\xef\xbb\xbf" if outcome.bom else b"") + outcome.after.encode("utf-8")

    done = hostwrite.replace_config(path, make, secret=secret, backup_name=_backup_name)
    return planned[-1], done


def _saved(done: hostwrite.Replaced) -> str:
    return t("(原文件备份为 {backup})", backup=done.backup) if done.backup else t("(新建)")


def _backup_name(target: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    backup = f"{target}.{PROG}-{stamp}.bak"
    n = 1
    while os.path.lexists(backup):
        n += 1
        backup = f"{target}.{PROG}-{stamp}-{n}.bak"
    return backup


def _entry_as_planned(host: Host, data: bytes | None, outcome: Outcome) -> bool:
    """Whether the file, read again right after our swap, still has our entry as planned."""
    if data is None:
        return False
    try:
        text, _bom = hosts.decode_config(data)
        if text == outcome.after:
            return True
        return bool(_ours(host, hosts.load(host, text)) == outcome.entry)
    except ValueError:  # the host is mid-write: we cannot tell, so we do not claim it
        return False


def hook_text(host: Host, text: str, argv: Sequence[str] | None) -> str:
    """`text` (a host's hook file) with our hooks for `argv` (the hook entry and its `--store-dir`), or
    without them (None)."""
    spec = hosts.hook_file(host)
    assert spec is not None
    if not text.strip() and argv is None:
        return text
    for event, _ in spec.events:
        text = confedit.json_pull(text, ("hooks",), event, hosts.is_our_hook)
    if argv is None:
        return text
    for name, value in spec.header:
        if confedit.json_get(text, (), name) is None:
            text = confedit.json_set(text, (), name, value)
    for event, ours in spec.events:
        text = confedit.json_append(text, ("hooks",), event, hosts.hook_entry(host, _shell([*argv, ours])))
    return text


def _shell(argv: Sequence[str]) -> str:
    """One command line for a host that runs hooks through a shell."""
    if sys.platform == "win32":
        import subprocess

        return subprocess.list2cmdline(list(argv))
    import shlex

    return shlex.join(argv)


def _plan_hooks(host: Host, read: tuple[str, bool] | None, argv: Sequence[str] | None) -> Outcome:
    before, bom = read if read is not None else ("", False)
    after = hook_text(host, before, argv)
    if argv is not None and before.strip() and confedit.parse_json(after) == confedit.parse_json(before):
        after = before  # ours already there, as they would be written (only their place could move)
    return Outcome(before if read is not None else None, after, bom)


def _hooks(host: Host, path: str, argv: Sequence[str] | None, out: TextIO, *, dry_run: bool) -> bool:
    """Install (or, `argv` None, remove) our hooks in `host`'s hook file; False when it failed."""
    spec = hosts.hook_file(host)
    assert spec is not None
    events = "/".join(event for event, _ in spec.events)
    about = {"host": host.name, "path": path}
    unchanged = t("= {host}:{path} 钩子已是最新,未改动\n", **about)
    absent = t("= {host}:{path} 没有我们的钩子,无需移除\n", **about)
    if argv is None and not dry_run and not os.path.lexists(path):
        out.write(absent)
        return True
    try:
        outcome, done = _apply(path, lambda read: _plan_hooks(host, read, argv), secret=False, dry_run=dry_run)
    except (OSError, ValueError) as exc:
        out.write(t("❌ {host}:钩子 {path} {problem},没有改动\n", problem=hosts.describe_problem(exc), **about))
        return False
    if done is None:
        if outcome.after == (outcome.before or ""):
            out.write(unchanged)
        else:
            out.write(t("~ {host}:{path} 钩子将被修改:\n", **about))
            out.write(_diff(path, outcome, None))
        return True
    if not done.changed:
        out.write(absent if argv is None else unchanged)
        return True
    what = t("已移除") if argv is None else t("已写入")
    saved = _saved(done)
    out.write(t("✅ {host}:{done} 钩子 {events} {path}{saved}\n", done=what, events=events, saved=saved, **about))
    return True


def _diff(path: str, outcome: Outcome, token: str | None) -> str:
    def masked(text: str) -> list[str]:
        if token:
            text = text.replace(token, t(MASK))
        return text.splitlines(keepends=True)

    before = outcome.before if outcome.before is not None else ""
    lines = difflib.unified_diff(
        masked(before), masked(outcome.after), fromfile=path if outcome.before is not None else "/dev/null", tofile=path
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _command_line(argv: Sequence[str]) -> str:
    return " ".join(f'"{word}"' if not word or any(c.isspace() for c in word) else word for word in argv)


# --------------------------------------------------------------------------------------------
# --serve: serve as a login service
# --------------------------------------------------------------------------------------------


def setup_service(
    invocation: Invocation,
    settings: config.Settings,
    env: Mapping[str, str],
    platform: str,
    *,
    dry_run: bool,
    remove: bool,
    out: TextIO,
    err: TextIO,
) -> int:
    """``setup --serve [--remove] [--dry-run]``: write (or delete) the OS's login service for
    ``serve --store-dir <store>`` and load (or unload) it with the OS's own tool."""
    from dsh_memory_mcp.cli import service
    from dsh_memory_mcp.transports import serve_file

    command, args = launch_command()
    store, why = choose_store(invocation, settings, env, platform)
    if _refuse_controls(err, store, why, command, ""):
        return EXIT_USAGE
    argv = [command, *args, "serve", "--store-dir", store]
    try:
        spec = service.spec(platform, env, argv)
    except ValueError as exc:  # a control character in HOME, XDG_CONFIG_HOME or LOCALAPPDATA
        return _usage(err, t("❌ 参数错误:{problem}", problem=exc))
    head = t("(预演:--dry-run,不写任何文件)") if dry_run else ""
    if remove:
        out.write(t("{prog} setup --serve --remove:撤销登录时启动的 serve{head}\n", head=head))
        if not os.path.lexists(spec.path):
            out.write(t("= {path} 不存在,没有安装过\n", path=spec.path))
            return EXIT_OK
        if dry_run:
            out.write(t("~ 将停掉并删除 {path}\n", path=spec.path))
            return EXIT_OK
        failed = _run_commands(spec.remove, out)
        os.unlink(spec.path)
        out.write(t("✅ 已删除 {path}{note}\n", path=spec.path, note=t("(停用命令有失败,见上)") if failed else ""))
        return EXIT_OK
    out.write(t("{prog} setup --serve:让 serve 在登录时自动启动({kind}){head}\n", kind=spec.kind, head=head))
    out.write(t("  命令:{argv}\n", argv=_command_line(argv)))
    out.write(t("  存储目录:{store}({why})\n", store=store, why=why))
    if dry_run:
        text = spec.content.decode("utf-16" if spec.kind == "schtasks" else "utf-8")
        out.write(t("~ 将写入 {path}:\n", path=spec.path) + text)
        for cmd in spec.install:
            out.write(t("~ 然后运行:{cmd}\n", cmd=_command_line([cmd[0].lstrip("-"), *cmd[1:]])))
        return EXIT_OK
    os.makedirs(os.path.dirname(spec.path), mode=0o700, exist_ok=True)
    fd, tmp = fileio.new_tmp(spec.path)
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o644)  # a unit/agent file: readable, it holds no secret
    fileio.commit(fd, tmp, spec.path, spec.content)
    out.write(t("✅ 已写入 {path}\n", path=spec.path))
    install = spec.install
    live = serve_file.owner(store)
    if live is not None and spec.kind == "systemd":
        # Starting a second serve for this store now would fail (one per store) and retry.
        install = tuple(tuple(w for w in cmd if w != "--now") for cmd in install)
        out.write(t("  ℹ️ serve 已经在运行(pid {pid}):只设为登录时启动,现在不再启动第二个\n", pid=live.pid))
    if _run_commands(install, out):
        return EXIT_FAIL
    out.write(t("  日志:{logs};网页的登录链接:{prog} web\n", logs=spec.logs))
    return EXIT_OK


def _refuse_controls(err: TextIO, store: str, why: str, command: str, url: str) -> bool:
    """Say so and answer True when a path or URL bound for a service file or host config holds a
    control character (in a systemd unit a newline starts a new directive: ``ExecStart=…``)."""
    for what, value in ((t("存储目录({why})", why=why), store), (t("本程序的路径"), command), ("--url", url)):
        char = control_char(value)
        if char is not None:
            _usage(
                err,
                t(
                    "❌ 参数错误:{what} 含控制字符 {char},不能写进服务文件或宿主配置;没有写任何文件",
                    what=what,
                    char=char,
                ),
            )
            return True
    return False


def _run_commands(commands: Sequence[Sequence[str]], out: TextIO) -> bool:
    """Run each command (a name starting with ``-`` may fail); True when one that must work did not."""
    import subprocess

    failed = False
    for cmd in commands:
        optional = cmd[0].startswith("-")
        argv = [cmd[0].lstrip("-"), *cmd[1:]]
        shown = _command_line(argv)
        exe = shutil.which(argv[0])
        if exe is None:
            if not optional:
                failed = True
                out.write(t("  ⚠️ 找不到 {name},请手动运行:{cmd}\n", name=argv[0], cmd=shown))
            continue
        problem = ""
        try:
            done: subprocess.CompletedProcess[str] | None = subprocess.run(
                [exe, *argv[1:]], capture_output=True, text=True, encoding="utf-8", timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            done = None
            problem = str(exc)
        if done is not None:
            said = (done.stderr or done.stdout).strip().splitlines()
            problem = said[0] if said else t("退出码 {code}", code=done.returncode)
        if done is not None and done.returncode == 0:
            out.write(t("  ✅ {cmd}\n", cmd=shown))
        elif not optional:
            failed = True
            out.write(t("  ⚠️ {cmd} 失败({problem});请在你的登录会话里手动运行它\n", cmd=shown, problem=problem))
    return failed
