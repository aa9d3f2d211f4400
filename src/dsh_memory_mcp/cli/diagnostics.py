"""Start-up diagnostics: why the server (or a subcommand) could not start and what fixes it (an
unusable store directory, a missing or broken SDK or dependency, an unexpected error). Reads the
filesystem at most; creates nothing.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Iterator
from typing import Literal

from dsh_memory_mcp import config, errors
from dsh_memory_mcp.cli.logs import log
from dsh_memory_mcp.cli.messages import shown, t
from dsh_memory_mcp.cli.output import describe

SDK_REQUIREMENT = config.SDK_REQUIREMENT
#: Top-level import names → the pip requirement that provides them.
_REQUIREMENTS = {
    "mcp": SDK_REQUIREMENT,
    "mcp_types": SDK_REQUIREMENT,
    **dict(config.DEPENDENCIES),
}
#: The SDK's own dependencies: broken or missing, the fix is reinstalling the SDK.
_SDK_DEPENDENCIES = frozenset(
    {
        "pydantic",
        "pydantic_core",
        "pydantic_settings",
        "anyio",
        "sniffio",
        "starlette",
        "sse_starlette",
        "uvicorn",
        "httpx_sse",
        "jsonschema",
        "typing_extensions",
        "typing_inspection",
        "multipart",
        "python_multipart",
        "annotated_types",
        "opentelemetry",
    }
)


def _parent(path: str) -> str:
    return os.path.dirname(os.path.normpath(path)) or os.curdir


def store_obstacle(path: str) -> tuple[Literal["file", "ancestor", "parent"], str] | None:
    """What on disk keeps `path` from being (or becoming) the store directory, looking only:
    ``("file", path)`` it is a file; ``("ancestor", a)`` its nearest existing ancestor `a` is a file;
    ``("parent", p)`` its parent `p` is missing (only the last level is created). None otherwise."""
    if os.path.lexists(path) and not os.path.isdir(path):
        return "file", path
    if os.path.isdir(path):
        return None
    parent = ancestor = _parent(path)
    while not os.path.lexists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if os.path.lexists(ancestor) and not os.path.isdir(ancestor):
        return "ancestor", ancestor
    return ("parent", parent) if not os.path.isdir(parent) else None


def explain_store_problem(path: str, error: BaseException | None = None) -> str | None:
    """Why `path` cannot serve as the store directory, in Chinese; None when nothing specific is found.

    Looks at the filesystem (creates nothing) and at the errno of `error`: drive missing, path is a
    file, a parent is missing or is a file, no write permission, read-only filesystem, disk full.
    """
    try:
        drive = os.path.splitdrive(path)[0]
        if drive and len(drive) == 2 and drive[1] == ":" and not os.path.exists(drive + os.sep):
            return t("盘符 {drive} 不存在(这台机器上没有这个盘)", drive=drive.upper())
        found = store_obstacle(path)
        if found is not None:
            kind, where = found
            if kind == "file":
                return t("路径已存在,但它是个文件,不是目录:{path}", path=where)
            if kind == "ancestor":
                return t("路径中的 {path} 是个文件,不是目录", path=where)
            return t("父目录不存在:{path}", path=where)
        code = getattr(error, "errno", None)
        target = path if os.path.isdir(path) else _parent(path)
        if code in (errno.EACCES, errno.EPERM):
            return t("没有写入权限:{path}", path=target)
        if code == errno.EROFS:
            return t("所在文件系统是只读的:{path}", path=target)
        if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return t("磁盘空间或配额已满:{path}", path=target)
        if not os.access(target, os.W_OK):
            return t("没有写入权限:{path}", path=target)
    except (OSError, ValueError):
        pass
    return None


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or `exc` itself."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, tuple) and type(exc).__name__.endswith("ExceptionGroup"):
        for item in inner:
            if isinstance(item, BaseException):
                yield from leaves(item)
    else:
        yield exc


def is_interrupt(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "CancelledError"


def store_failure(exc: BaseException, settings: config.Settings) -> tuple[str, OSError] | None:
    """(path, error) when `exc` means the store directory is unusable."""
    if isinstance(exc, errors.StoreError):
        return (exc.path or settings.store_dir), exc
    if isinstance(exc, OSError) and exc.filename:
        filename = os.path.normpath(os.path.abspath(os.fsdecode(exc.filename)))
        store = os.path.normpath(settings.store_dir)
        if filename == store or filename.startswith(store + os.sep) or store.startswith(filename + os.sep):
            return filename, exc
    return None


def debug_lines(exc: BaseException, settings_debug: bool) -> list[str]:
    if settings_debug:
        return [t("调用栈(DSH_MEMORY_DEBUG=1):") + "\n" + "".join(traceback.format_exception(exc)).rstrip()]
    return []


def report_store_failure(path: str, error: OSError, settings: config.Settings, top: BaseException) -> None:
    original: BaseException = error
    if isinstance(error, errors.StoreError) and isinstance(error.__cause__, BaseException):
        original = error.__cause__
    # Our own short reason first (the StoreError's message is often a whole sentence that repeats
    # the path and the fix); the error's own words when the filesystem shows nothing specific.
    reason = explain_store_problem(path, original)
    if reason is None:
        if isinstance(error, errors.StoreError) and error.message.strip():
            reason = shown(error.message).strip()
        elif isinstance(original, OSError) and original.strerror:
            reason = original.strerror
        else:
            reason = shown(describe(original))
    lines = [
        t("❌ 启动失败:记忆存储目录不可用:{path}", path=path),
        t("⇒ 原因:{reason}", reason=reason),
        t(
            "⇒ 改 --store-dir(或环境变量 DSH_MEMORY_STORE_DIR)指向一个已存在且可写的目录;默认是 {default}",
            default=config.default_store_dir(),
        ),
        t("原始错误:{error}", error=describe(original)),
        *debug_lines(top, settings.debug),
    ]
    for line in lines:
        log.error("%s", line)


def report_unexpected(exc: BaseException, debug: bool, *, started: bool, top: BaseException | None = None) -> None:
    what = t("服务异常退出") if started else t("启动失败")
    hint = "" if debug else t("(设 DSH_MEMORY_DEBUG=1 可看完整调用栈)")
    log.error("%s", t("❌ {what}:意外错误 {error}{hint}", what=what, error=describe(exc), hint=hint))
    for line in debug_lines(top or exc, debug):
        log.error("%s", line)


class ImportProblem(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _third_party_modules(exc: BaseException) -> list[str]:
    """Module names in the traceback outside this package and the import machinery, outermost first."""
    names: list[str] = []
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__")
        if (
            isinstance(name, str)
            and name
            and not name.startswith(("dsh_memory_mcp", "importlib", "_frozen_importlib"))
            and name not in names
        ):
            names.append(name)
        tb = tb.tb_next
    return names


def report_import_problem(problem: ImportProblem, debug: bool) -> None:
    exc = problem.cause
    missing = exc.name if isinstance(exc, ImportError) and exc.name else None
    frames = _third_party_modules(exc)
    culprit = missing or (frames[-1] if frames else None)
    outer = frames[0] if frames else culprit
    python = sys.executable or "python"
    reinstall = t(
        "重装本包(依赖会一并装好):pip install {prog} --force-reinstall"
        "(pipx 装的:pipx reinstall {prog};uvx:uvx --refresh {prog};源码仓库里:pip install -e .)"
    )
    if culprit is None or culprit.split(".")[0] == "dsh_memory_mcp":
        if culprit is not None or isinstance(exc, ImportError):
            lines = [
                t("❌ 启动失败:{prog} 安装不完整,找不到 {module}", module=culprit or t("服务模块")),
                t("⇒ 修复:{fix}", fix=reinstall),
            ]
        else:
            lines = [
                t("❌ 启动失败:加载服务模块时出错(多半是 {prog} 自身的问题,请附上 DSH_MEMORY_DEBUG=1 的输出报告)"),
                t("⇒ 可以先试试{fix}", fix=reinstall),
            ]
    else:
        top = culprit.split(".")[0]
        via = outer.split(".")[0] if outer else top
        sdk = top in ("mcp", "mcp_types") or top in _SDK_DEPENDENCIES or via in ("mcp", "mcp_types")
        requirement = _REQUIREMENTS.get(top, SDK_REQUIREMENT if sdk else top)
        what = t("MCP Python SDK 或它的依赖") if sdk else t("运行依赖")
        state = t("缺失") if isinstance(exc, ModuleNotFoundError) else t("已损坏(导入时出错)")
        detail = f"{top}" + (t("(导入 {module} 时)", module=via) if via != top else "")
        lines = [
            t("❌ 启动失败:{what}{state}:{detail}", what=what, state=state, detail=detail),
            t(
                '⇒ 修复:pip install "{requirement}"(在运行 {prog} 的同一个 Python 环境里执行,即 {python} -m pip …;'
                "已装过但坏了就加 --force-reinstall)",
                requirement=requirement,
                python=python,
            ),
        ]
        if sdk and requirement != SDK_REQUIREMENT:
            lines.append(
                t('⇒ 也可以直接重装 SDK:pip install --force-reinstall "{requirement}"', requirement=SDK_REQUIREMENT)
            )
        lines.append(t("⇒ 或者{fix}", fix=reinstall))
    lines.append(t("原始错误:{error}", error=describe(exc)))
    lines.extend(debug_lines(exc, debug))
    for line in lines:
        log.error("%s", line)
