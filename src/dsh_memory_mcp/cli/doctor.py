"""`dsh-memory-mcp doctor`: is this machine set up right? One line per check, in Chinese.

Checks the interpreter, the SDK and the other runtime dependencies (version and where they
resolve from), the effective store directory (does it exist, can it be written, does it already
hold a store, is it the default one that DSH may not be using), the vector setup (llama-server
found, model present, pooling, someone already answering on the port, the endpoint's dimension)
and the sidecar headers against the active model.

It also reports the store's running `serve` (url, pid, version, sessions, from its ``serve.json``
and ``GET /health``), whether a stdio host started now would relay to it, and for every URL host
config whether its token gets through (a real ``GET /health`` at its URL with its headers).

Read-only by design: it creates and writes nothing (no store directory, no log, no lock, no
sidecar) and never spawns a process. The only network traffic goes to the configured endpoint, to
``127.0.0.1:<port>``, to the serve ``serve.json`` names and to the URLs host configs name, with
short timeouts. The SDK is located (`importlib.util.find_spec`), never
imported; httpx is reached through `embedding` and numpy through `sidecar`, both imported lazily
and only when there is something to probe or read.

`run_checks` is pure data (a list of `Check`); `main` renders it: ``✅ 标题:细节``,
``⚠️ 标题:细节 ⇒ 怎么改``, ``❌ …``, then a summary; exit 1 when any check failed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO

from dsh_memory_mcp import __version__, config
from dsh_memory_mcp.cli.output import PROG
from dsh_memory_mcp.store import scopes
from dsh_memory_mcp.store.layout import StoreLayout

if TYPE_CHECKING:
    from dsh_memory_mcp.cli.hosts import Configured
    from dsh_memory_mcp.search.embedding import EmbeddingClient

__all__ = [
    "PYTHON_FLOOR",
    "SDK_REQUIREMENT",
    "Check",
    "main",
    "render",
    "run_checks",
]

Status = Literal["ok", "warn", "fail"]

PYTHON_FLOOR = (3, 11)
SDK_REQUIREMENT = config.SDK_REQUIREMENT
DEPENDENCIES = config.DEPENDENCIES
HEALTH_TIMEOUT = 1.0
EMBED_TIMEOUT = 2.0

_ICONS: dict[Status, str] = {"ok": "✅", "warn": "⚠️", "fail": "❌"}
_STORE_FIX = "用 --store-dir / DSH_MEMORY_STORE_DIR 指向 DSH 的 storeDir"
_ENABLE_FIX = (
    "把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(llama-server 在 PATH 上,或用 DSH_MEMORY_EMBED_EXE 指定),"
    "或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务;不需要语义检索就设 DSH_MEMORY_VECTOR=off"
)
_POOLINGS = ("none", "mean", "cls", "last", "rank")


@dataclass(frozen=True)
class Check:
    """One line of the report: how it went, what was checked, what was found, how to fix it."""

    status: Status
    title: str
    detail: str
    fix: str | None = None


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def render(check: Check) -> str:
    line = f"{_ICONS[check.status]} {check.title}:{check.detail}"
    if check.fix and check.status != "ok":
        line += f" ⇒ {check.fix}"
    return line


def main(args: Sequence[str], settings: config.Settings, *, out: TextIO, err: TextIO) -> int:
    """Print the report to `out`; 0 when nothing is broken (warnings allowed), 1 otherwise."""
    if args:
        err.write(f"doctor 不接受参数:{' '.join(args)}\n")
        return 2
    out.write(f"dsh-memory-mcp {__version__} 自检(只读:不建目录、不写文件、不启动进程)\n")
    checks = run_checks(settings)
    for check in checks:
        out.write(render(check) + "\n")
    fails = sum(c.status == "fail" for c in checks)
    warns = sum(c.status == "warn" for c in checks)
    if fails:
        summary = f"结论:{fails} 项有问题(❌),需要先修复" + (f";另有 {warns} 项值得注意(⚠️)" if warns else "")
    elif warns:
        summary = f"结论:可以运行;{warns} 项值得注意(⚠️)"
    else:
        summary = "结论:一切正常"
    out.write(summary + "\n")
    out.flush()
    return 1 if fails else 0


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------


def run_checks(settings: config.Settings, *, env: Mapping[str, str] | None = None) -> list[Check]:
    """Every check, in report order. Creates nothing, spawns nothing; never raises."""
    env = config.environ() if env is None else env
    checks: list[Check] = []
    steps: list[tuple[str, Callable[[], Iterator[Check]]]] = [
        ("Python", lambda: iter([check_python(tuple(sys.version_info[:3]), sys.executable)])),
        ("MCP SDK", lambda: iter([check_sdk()])),
        ("依赖", lambda: iter([check_dependencies()])),
        ("dsh-memory-mcp", lambda: iter([_check_self()])),
        ("存储目录", lambda: check_store(settings)),
        ("记忆库完整性", lambda: check_store_health(settings)),
        ("project", lambda: iter([_check_project(settings)])),
        ("环境变量", lambda: iter(Check("warn", "环境变量", w, "改成合法的值或删掉它") for w in settings.warnings)),
        ("serve", lambda: check_serve(settings, env)),
        ("宿主配置", lambda: check_hosts(settings, env)),
    ]
    for title, step in steps:
        checks.extend(_guarded(title, step))
    vector_checks: list[Check] = []
    active = _Active(None, None, False)
    try:
        vector_checks, active = check_vectors(settings, env)
    except Exception as exc:  # a doctor must report, not crash
        vector_checks = [_crashed("向量检索", exc)]
    checks.extend(vector_checks)
    checks.extend(_guarded("向量文件", lambda: iter(check_sidecars(settings, active))))
    checks.extend(_guarded("相关性门限", lambda: iter(check_calibration(settings, active))))
    return checks


def _guarded(title: str, step: Callable[[], Iterator[Check]]) -> list[Check]:
    try:
        return list(step())
    except Exception as exc:  # a doctor must report, not crash
        return [_crashed(title, exc)]


def _crashed(title: str, exc: BaseException) -> Check:
    return Check("fail", title, f"检查本身出错({type(exc).__name__}: {exc})", "这是 doctor 的缺陷,请带上这一行报告")


def check_python(version: Sequence[int], executable: str = "") -> Check:
    shown = ".".join(str(part) for part in version[:3])
    floor = ".".join(map(str, PYTHON_FLOOR))
    where = f",解释器 {executable}" if executable else ""
    if tuple(version[:2]) < PYTHON_FLOOR:
        return Check(
            "fail",
            "Python 版本",
            f"{shown}(要求 >= {floor}){where}",
            f"换用 Python {floor} 或更新的解释器,并让 MCP 配置的 command 指向它",
        )
    return Check("ok", "Python 版本", f"{shown}(要求 >= {floor}){where}")


def _version_tuple(text: str) -> tuple[int, ...]:
    """`2.3.0` → (2, 3, 0); `1.0rc1` → (1, 0); stops at the first part that is not a number."""
    parts: list[int] = []
    for part in text.split("."):
        match = re.match(r"\d+", part)
        if not match:
            break
        parts.append(int(match.group()))
        if match.end() != len(part):
            break
    return tuple(parts)


def satisfies(version: str, requirement: str) -> bool:
    """Whether `version` meets the `>=a,<b` part of a requirement like ``mcp>=2.3,<3``."""
    have = _version_tuple(version)
    spec = re.sub(r"^[A-Za-z0-9_.\-]+", "", requirement)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = re.fullmatch(r"(>=|<=|==|<|>)\s*([\w.]+)", clause)
        if not match:
            continue
        op, bound = match.group(1), _version_tuple(match.group(2))
        width = max(len(have), len(bound))
        a = have + (0,) * (width - len(have))
        b = bound + (0,) * (width - len(bound))
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "<": a < b, ">": a > b}[op]
        if not ok:
            return False
    return True


def _locate(name: str) -> str | None:
    """Where `import name` would load from (without importing it), or None when it cannot."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return next(iter(spec.submodule_search_locations))
    return spec.origin


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_sdk() -> Check:
    title = "MCP SDK"
    fix = f'pip install "{SDK_REQUIREMENT}"(用运行本服务的那个 Python:{sys.executable} -m pip …)'
    where = _locate("mcp")
    version = _dist_version("mcp")
    if where is None:
        return Check("fail", title, "没有安装(import mcp 找不到)", fix)
    if version is None:
        return Check("fail", title, f"找到了 {where},但没有安装记录(不是 pip 装的 mcp 包?)", fix)
    if not satisfies(version, SDK_REQUIREMENT):
        return Check("fail", title, f"mcp {version} 不满足 {SDK_REQUIREMENT}({where})", fix)
    installed = _installed_location("mcp", "mcp/__init__.py")
    origin = importlib.util.find_spec("mcp")
    origin_file = origin.origin if origin is not None else None
    if installed and origin_file and os.path.realpath(installed) != os.path.realpath(origin_file):
        return Check(
            "warn",
            title,
            f"mcp {version} 装在 {os.path.dirname(installed)},但 import mcp 会解析到 {where}(被同名目录或文件遮蔽)",
            "删除或改名遮蔽它的 mcp 目录/mcp.py,或换一个工作目录再运行",
        )
    return Check("ok", title, f"mcp {version}(要求 {SDK_REQUIREMENT.removeprefix('mcp')}),来自 {where}")


def _installed_location(dist: str, relpath: str) -> str | None:
    try:
        located = importlib.metadata.distribution(dist).locate_file(relpath)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = str(located)
    return path if os.path.exists(path) else None


def check_dependencies() -> Check:
    found: list[str] = []
    problems: list[str] = []
    wanted: list[str] = []
    for name, requirement in DEPENDENCIES:
        version = _dist_version(name)
        if version is None or _locate(name) is None:
            problems.append(f"{name} 没有安装")
            wanted.append(requirement)
        elif not satisfies(version, requirement):
            problems.append(f"{name} {version} 不满足 {requirement}")
            wanted.append(requirement)
        else:
            found.append(f"{name} {version}")
    if problems:
        fix = "pip install " + " ".join(f'"{r}"' for r in wanted)
        return Check("fail", "其他依赖", ";".join(problems) + (f"(其余正常:{', '.join(found)})" if found else ""), fix)
    return Check("ok", "其他依赖", ", ".join(found))


def _check_self() -> Check:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return Check("ok", "dsh-memory-mcp", f"{__version__} {here}")


# -- store ----------------------------------------------------------------------------------


def _scope_files(store: str) -> list[str]:
    """Scope files in the store, relative paths (`global.jsonl`, `projects/<sha1>.jsonl`)."""
    return StoreLayout.at(store).scope_files()


def check_store(settings: config.Settings) -> Iterator[Check]:
    store = settings.store_dir
    title = "存储目录"
    if settings.store_dir_is_default:
        yield Check("warn", "storeDir", f"{store} 是默认值,不一定是 DSH 插件在用的库", _STORE_FIX)
    if os.path.lexists(store) and not os.path.isdir(store):
        yield Check(
            "fail", title, f"{store} 已存在,但它是个文件,不是目录", "用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个目录"
        )
        return
    if os.path.isdir(store):
        if not os.access(store, os.W_OK | os.X_OK):
            yield Check(
                "fail",
                title,
                f"{store} 没有写入权限",
                f"给当前用户写权限(如 chmod u+w {store}),或用 --store-dir / DSH_MEMORY_STORE_DIR 换一个目录",
            )
            return
        files = _scope_files(store)
        if files:
            has_global = ",含 global.jsonl" if "global.jsonl" in files else ""
            yield Check("ok", title, f"{store} 看起来是一份已有的记忆库({len(files)} 个作用域文件{has_global})")
        else:
            yield Check(
                "ok",
                title,
                f"{store} 存在、可写,还没有作用域文件(空库;若你以为这里已有 DSH 的记忆,说明目录指错了)",
            )
        return
    # Missing: the server creates it (and only it) at first start, so the parent must be usable.
    parent = os.path.dirname(store) or os.curdir
    ancestor = parent
    while not os.path.lexists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if os.path.lexists(ancestor) and not os.path.isdir(ancestor):
        yield Check(
            "fail",
            title,
            f"{store} 不存在,且路径中的 {ancestor} 是个文件,不是目录",
            "用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个可用的目录",
        )
        return
    if not os.path.isdir(parent):
        yield Check(
            "fail",
            title,
            f"{store} 不存在,父目录 {parent} 也不存在(启动时只会建最后一级)",
            f"先创建父目录(mkdir -p {parent}),或用 --store-dir / DSH_MEMORY_STORE_DIR 指向已存在的位置",
        )
        return
    if not os.access(parent, os.W_OK | os.X_OK):
        yield Check(
            "fail",
            title,
            f"{store} 不存在,且父目录 {parent} 没有写入权限,启动时无法创建",
            "用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个可写的位置",
        )
        return
    yield Check(
        "warn",
        title,
        f"{store} 还不存在,首次启动时会创建(空库)",
        "若要与 DSH 共用记忆,确认这就是 DSH 的 storeDir;否则" + _STORE_FIX,
    )


def check_store_health(settings: config.Settings) -> Iterator[Check]:
    """Read-only: `scopes.json` usable, no acknowledged record erased, no leftover tmp files."""
    if not os.path.isdir(settings.store_dir):
        return
    from dsh_memory_mcp.store.shared import RECOVER_HINT, SharedStore

    store = SharedStore(settings.store_dir)
    problem = store.aliases_problem()
    if problem is not None:
        yield Check("warn", "作用域别名", problem, "修复 JSON(或删除该文件后重新登记别名)")
    missing = store.missing()
    if missing:
        total = sum(len(lost) for lost in missing.values())
        where = ",".join(f"{scope} {len(lost)} 条" for scope, lost in missing.items())
        yield Check(
            "fail",
            "被覆盖的记忆",
            f"{total} 条本服务确认保存过、从未删除或取代的记忆已不在文件里({where}),多半是不加锁的写入者覆盖了文件",
            RECOVER_HINT,
        )
    else:
        yield Check("ok", "被覆盖的记忆", "写入日志中确认保存的记录都还在")
    leftovers = store.leftover_tmps()
    if leftovers:
        yield Check(
            "warn",
            "遗留临时文件",
            f"{len(leftovers)} 个已退出的写入者留下的临时文件:" + ",".join(os.path.basename(p) for p in leftovers),
            "无需处理:下次写入(或服务启动)时会自动清除",
        )


def _check_project(settings: config.Settings) -> Check:
    project = settings.project_dir
    key = scopes.project_key(project, project)
    saved = f";默认保存作用域 = {settings.default_save_scope}"
    detail = f"{project}(project 作用域 = {key}){saved}"
    if not os.path.isdir(project):
        return Check(
            "warn", "project", f"{detail};这个目录不存在", "用 --project / DSH_MEMORY_PROJECT 指向当前工作区目录"
        )
    if os.path.isfile(StoreLayout.at(settings.store_dir).scope_path(key)):
        detail += ";库里已有这个项目的记忆"
    return Check("ok", "project", detail)


# -- vectors --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Active:
    """What the vector channel would use: the header it writes sidecars with, as far as known."""

    model_id: str | None
    dims: int | None
    enabled: bool


@dataclass(frozen=True)
class _Probe:
    health: str  # ready / loading / down / foreign
    served_id: str | None = None
    dims: int | None = None
    error: str | None = None


def _client(base_url: str, model: str | None = None) -> EmbeddingClient:
    from dsh_memory_mcp.search.embedding import EmbeddingClient  # httpx: only when there is something to probe

    return EmbeddingClient(base_url, model=model)


def _probe(base_url: str, *, model: str | None, embed: bool) -> _Probe:
    """/health, then /v1/models (and, with `embed`, one embedding of "ping") to learn the width."""
    from dsh_memory_mcp.errors import EmbeddingUnavailable

    client = _client(base_url, model)
    try:
        health = client.health(timeout=HEALTH_TIMEOUT)
        if health in ("down", "loading") or (health == "foreign" and not embed):
            return _Probe(health)
        info = client.model_info(timeout=HEALTH_TIMEOUT)
        dims = info.dims
        error = None
        if embed and (dims is None or health == "foreign"):
            if client.model is None and info.name:
                client.model = info.name
            try:
                dims = len(client.embed(["ping"], timeout=EMBED_TIMEOUT)[0])
            except EmbeddingUnavailable as exc:
                error = str(exc)
        return _Probe(health, info.model_id, dims, error)
    finally:
        client.close()


def check_vectors(settings: config.Settings, env: Mapping[str, str]) -> tuple[list[Check], _Active]:
    v = settings.vector
    title = "向量检索"
    if not v.enabled:
        return [Check("ok", title, "已关闭(DSH_MEMORY_VECTOR=off),只用词法检索")], _Active(None, None, False)
    checks: list[Check] = []
    if v.invalid_pooling is not None:
        checks.append(
            Check(
                "warn",
                "池化方式",
                f"不认识 DSH_MEMORY_EMBED_POOLING={v.invalid_pooling!r},将被忽略并按模型推断",
                f"把 DSH_MEMORY_EMBED_POOLING 设为 {'/'.join(_POOLINGS)} 之一,或删掉它",
            )
        )
    if not v.usable:
        checks.append(Check("warn", title, f"不可用({v.unavailable_reason}),只有词法检索,没有语义召回", _ENABLE_FIX))
        return checks, _Active(None, None, False)
    if v.endpoint is not None:
        more, active = _check_endpoint(v)
    else:
        more, active = _check_local(v, env)
    return checks + more, active


def _check_endpoint(v: config.VectorSettings) -> tuple[list[Check], _Active]:
    assert v.endpoint is not None
    title = "嵌入端点"
    probe = _probe(v.endpoint, model=v.model_id if v.model else None, embed=True)
    # The sidecar header: an explicit DSH_MEMORY_EMBED_MODEL names the endpoint's model, else the
    # server's own id, else the default (SPEC §3) — what `VectorChannel._pick_model_id` does.
    model_id = v.model_id if v.model else (probe.served_id or v.model_id)
    fix_down = (
        f"先启动 {v.endpoint} 上的嵌入服务,或改正 DSH_MEMORY_EMBED_ENDPOINT(不想用向量就设 DSH_MEMORY_VECTOR=off)"
    )
    if probe.health == "down":
        return [Check("fail", title, f"{v.endpoint} 没有应答(连接被拒绝)", fix_down)], _Active(model_id, None, True)
    if probe.health == "loading":
        return [Check("warn", title, f"{v.endpoint} 正在加载模型(/health 返回 503)", "稍等片刻再运行 doctor")], _Active(
            model_id, None, True
        )
    if probe.dims is None:
        why = probe.error or "既没有 /v1/models 的维度,嵌入请求也没有结果"
        return [Check("fail", title, f"{v.endpoint} 不能生成向量({why})", fix_down)], _Active(model_id, None, True)
    named = "DSH_MEMORY_EMBED_MODEL 的文件名" if v.model else ("服务报告" if probe.served_id else "默认值")
    detail = f"{v.endpoint} 正常应答,model={model_id}({named}) dims={probe.dims};设了端点,永不启动或停止进程"
    return [Check("ok", title, detail)], _Active(model_id, probe.dims, True)


def _check_local(v: config.VectorSettings, env: Mapping[str, str]) -> tuple[list[Check], _Active]:
    assert v.model is not None
    checks: list[Check] = []
    base = f"http://127.0.0.1:{v.port}"
    probe = _probe(base, model=None, embed=False)
    reused = probe.health in ("ready", "loading")

    # Model file
    model_fix = "把 DSH_MEMORY_EMBED_MODEL 设为 .gguf 嵌入模型文件的完整路径"
    if os.path.isfile(v.model):
        suffix = "" if v.model.lower().endswith(".gguf") else "(注意:文件名不以 .gguf 结尾,llama-server 只认 GGUF)"
        status: Status = "ok" if not suffix else "warn"
        checks.append(Check(status, "嵌入模型", f"{v.model} model={v.model_id}{suffix}", model_fix if suffix else None))
    elif reused:
        checks.append(
            Check(
                "warn",
                "嵌入模型",
                f"文件不存在:{v.model};端口 {v.port} 上已有服务会被复用,但它停掉后就无法自行启动",
                model_fix,
            )
        )
    else:
        checks.append(Check("fail", "嵌入模型", f"文件不存在:{v.model}", model_fix))

    # Pooling: explicit, inferred, or left to the GGUF.
    raw = (env.get("DSH_MEMORY_EMBED_POOLING") or "").strip().lower()
    inferred = config.infer_pooling(v.model_id)
    pool_fix = "若检索效果差请设置 DSH_MEMORY_EMBED_POOLING"
    if raw in _POOLINGS:
        if inferred is not None and raw != inferred:
            checks.append(
                Check(
                    "warn",
                    "池化方式",
                    f"DSH_MEMORY_EMBED_POOLING={raw},但 {v.model_id} 这一家族应为 {inferred};池化不对会悄悄毁掉召回",
                    f"确认无误就保留,否则删掉 DSH_MEMORY_EMBED_POOLING 或设为 {inferred}",
                )
            )
        else:
            checks.append(Check("ok", "池化方式", f"--pooling {raw}(DSH_MEMORY_EMBED_POOLING 显式指定)"))
    elif inferred is not None:
        checks.append(Check("ok", "池化方式", f"--pooling {inferred}(按模型家族 {v.model_id} 推断)"))
    else:
        checks.append(
            Check(
                "warn",
                "池化方式",
                f"{v.model_id}:未知模型家族,不传 --pooling,由 GGUF 决定",
                f"{pool_fix}(可选 {'/'.join(_POOLINGS)})",
            )
        )

    # Executable
    exe_path = shutil.which(v.exe) or (v.exe if os.path.isfile(v.exe) else None)
    exe_fix = "把 llama-server 加入 PATH,或用 DSH_MEMORY_EMBED_EXE 指定它的完整路径"
    if exe_path is not None:
        checks.append(Check("ok", "llama-server", exe_path))
    elif reused:
        checks.append(
            Check("warn", "llama-server", f"找不到 {v.exe!r};端口上已有服务会被复用,但本服务无法自行启动它", exe_fix)
        )
    else:
        checks.append(Check("fail", "llama-server", f"找不到可执行文件 {v.exe!r}", exe_fix))

    # Port
    model_id = v.model_id
    dims: int | None = None
    port_title = f"端口 {v.port}"
    if probe.health == "ready":
        dims = probe.dims
        if probe.served_id and probe.served_id != v.model_id:
            model_id = probe.served_id
            checks.append(
                Check(
                    "warn",
                    port_title,
                    f"已有 llama-server 在应答,将复用(不会启动新进程);但它加载的是 {probe.served_id},"
                    f"不是配置的 {v.model_id},向量将按 {probe.served_id} 记录",
                    "停掉那个服务,或用 DSH_MEMORY_EMBED_PORT 换一个端口让本服务自己启动",
                )
            )
        else:
            shown = f" model={probe.served_id or v.model_id}" + (f" dims={dims}" if dims else "")
            checks.append(Check("ok", port_title, f"已有 llama-server 在应答,将复用(不会启动新进程){shown}"))
    elif probe.health == "loading":
        checks.append(Check("ok", port_title, "已有 llama-server 正在加载模型,将复用(不会启动新进程)"))
    elif probe.health == "foreign":
        checks.append(
            Check(
                "fail",
                port_title,
                f"被其他程序占用({base}/health 的应答不像 llama-server)",
                "用 DSH_MEMORY_EMBED_PORT 换一个空闲端口",
            )
        )
    else:
        can_spawn = os.path.isfile(v.model) and exe_path is not None
        then = "首次启动时将拉起 llama-server(日志写到存储目录)" if can_spawn else "没有现成的服务可复用"
        checks.append(Check("ok", port_title, f"空闲,{then}"))
    return checks, _Active(model_id, dims, True)


# -- sidecars -------------------------------------------------------------------------------


def _sidecar_files(store: str) -> list[str]:
    return StoreLayout.at(store).vec_files()


def check_calibration(settings: config.Settings, active: _Active) -> list[Check]:
    """The model's relevance gate as cached by the vector channel (search/calibration.py); reads only."""
    if not active.enabled or active.model_id is None:
        return []
    from dsh_memory_mcp.search import calibration

    found = [
        c
        for c in calibration.cached_for_model(settings.store_dir, active.model_id)
        if active.dims is None or c.dims == active.dims
    ]
    if not found:
        return [
            Check(
                "ok",
                "相关性门限",
                f"模型 {active.model_id} 尚未校准:向量后端第一次就绪时自动校准(嵌入 24 句探针,只做一次)",
            )
        ]
    out = []
    for cal in found:
        rule = "与默认规则(余弦 ≥0.5)相同" if cal.seed_rule else "不相关文本的相似度偏高,按模型自适应"
        out.append(Check("ok", "相关性门限", f"模型 {cal.model}({cal.dims} 维,{cal.scheme}):{rule}"))
        out.extend(Check("ok", "相关性门限", f"  {line}") for line in cal.lines())
    return out


def check_sidecars(settings: config.Settings, active: _Active) -> list[Check]:
    store = settings.store_dir
    if not os.path.isdir(store):
        return []
    files = _sidecar_files(store)
    title = "向量文件"
    if not files:
        return []
    try:
        from dsh_memory_mcp.search.sidecar import read_header  # numpy: only when there is a sidecar to read
    except Exception as exc:  # numpy missing or broken: say so, do not crash
        return [Check("warn", title, f"{len(files)} 个,但无法读取文件头({exc})", 'pip install "numpy>=1.26"')]
    headers = {name: read_header(os.path.join(store, name)) for name in files}
    groups: dict[str, list[str]] = {}
    for name, header in headers.items():
        groups.setdefault(f"{header[0]}/{header[1]}" if header else "无法识别", []).append(name)
    found = ",".join(f"{key} ×{len(names)}" for key, names in groups.items())
    if not active.enabled or active.model_id is None:
        return [Check("ok", title, f"{len(files)} 个({found});向量检索未启用,不会改动它们")]

    def matches(header: tuple[str, int] | None) -> bool:
        if header is None:
            return False
        return header[0] == active.model_id and (active.dims is None or header[1] == active.dims)

    stale = [name for name, header in headers.items() if not matches(header)]
    want = f"{active.model_id}/{active.dims}" if active.dims else f"{active.model_id}(维度未知,只比较模型名)"
    if not stale:
        return [Check("ok", title, f"{len(files)} 个,文件头与当前模型一致({want})")]
    shown = ", ".join(stale[:3]) + (" …" if len(stale) > 3 else "")
    return [
        Check(
            "warn",
            title,
            f"{len(stale)}/{len(files)} 个文件头与当前模型 {want} 不一致({found}:{shown}),将作废并重新嵌入",
            "若这是与 DSH 共用的库,让两边用同一个模型(DSH_MEMORY_EMBED_MODEL 指向 DSH 的 .gguf),"
            "否则双方会反复作废对方的向量",
        )
    ]


# --------------------------------------------------------------------------------------------
# Hosts: which ones start us, with which executable and which store
# --------------------------------------------------------------------------------------------


def check_hosts(settings: config.Settings, env: Mapping[str, str], platform: str = sys.platform) -> Iterator[Check]:
    """One line per configured host entry; flags a missing executable and a store unlike the others'."""
    from collections import Counter

    from dsh_memory_mcp.cli import hosts

    entries, broken = hosts.configured(env, platform)
    for host, path, why in broken:
        yield Check("warn", f"宿主 {host.name}", f"{path} {why}", f"修好这个文件,或运行 {PROG} setup {host.id}")
    if not entries:
        yield Check("warn", "宿主配置", "本机没有宿主配置了 dsh-memory", f"运行 {PROG} setup 为已安装的宿主写入配置")
        return

    def norm(path: str | None) -> str:
        return os.path.normcase(os.path.normpath(os.path.abspath(os.path.expanduser(path or settings.store_dir))))

    stores = Counter(norm(e.store) for e in entries if e.url is None)
    usual = stores.most_common(1)[0][0] if stores else None
    for entry in entries:
        title = f"宿主 {entry.host.name}"
        if entry.url is not None:
            yield check_url_entry(entry)
            continue
        store = norm(entry.store)
        where = f"{entry.path}:{entry.name} → 可执行文件 {entry.command or '?'},存储 {store}" + (
            "" if entry.store else "(条目没写 --store-dir,按缺省)"
        )
        problem = hosts.executable_problem(entry.command, env)
        if problem is not None:
            yield Check("fail", title, f"{where};{problem}", f"重新运行 {PROG} setup {entry.host.id}")
        elif len(stores) > 1 and store != usual:
            others = "、".join(s for s in stores if s != store)
            yield Check(
                "warn",
                title,
                f"{where};与其它宿主的存储({others})不同,两边看到的是两份记忆",
                f"{PROG} setup --store-dir <同一个目录> 统一",
            )
        else:
            yield Check("ok", title, where)
    if len(stores) == 1 and usual != norm(settings.store_dir):
        yield Check(
            "warn",
            "宿主配置",
            f"宿主都用存储 {usual},本次检查的是 {settings.store_dir}",
            f"用 {PROG} doctor --store-dir {usual} 检查宿主实际用的库",
        )


# --------------------------------------------------------------------------------------------
# serve: is one running, will stdio hosts relay to it, do URL host configs get through
# --------------------------------------------------------------------------------------------


def check_serve(settings: config.Settings, env: Mapping[str, str]) -> Iterator[Check]:
    """The store's `serve` (from its ``serve.json`` and a ``GET /health`` there, as the relay
    decides) and what a stdio host started now would do: relay to it or open the store itself."""
    from dsh_memory_mcp.transports import relay, serve_file

    found, why = relay.find_serve(settings.store_dir)
    info, _ = serve_file.read(settings.store_dir)
    if found is None:
        if info is not None and info.alive:
            yield Check(
                "warn",
                "serve",
                f"serve.json 记录的 pid {info.pid} 还在,但 {info.url} 没有用文件里的令牌应答({why})",
                f"那个进程若已不是 serve,删除 {serve_file.path_for(settings.store_dir)};否则重启 serve",
            )
        else:
            yield Check("ok", "serve", f"没有在运行({why})")
        yield Check(
            "ok",
            "stdio 宿主",
            "直连记忆库(每个宿主一个进程);要共享一个进程就运行 " + f"{PROG} serve 或 {PROG} setup --serve",
        )
        return
    live = found.info
    data = serve_file.health(live) or {}
    raw_calls = data.get("toolCalls")
    calls: dict[str, object] = raw_calls if isinstance(raw_calls, dict) else {}
    version = data.get("version", live.version)
    running, queued, limit = (calls.get(k, "?") for k in ("running", "queued", "limit"))
    detail = (
        f"运行中:{live.url},pid {live.pid},v{version},{data.get('sessions', '?')} 个会话,"
        f"工具调用 {running} 个在跑 / {queued} 个排队(上限 {limit})"
    )
    if version != __version__:
        yield Check("warn", "serve", f"{detail};本程序是 v{__version__}", "重启 serve 换成同一个版本")
    else:
        yield Check("ok", "serve", detail)
    if config.relay_off(env):
        yield Check(
            "warn", "stdio 宿主", "DSH_MEMORY_RELAY=off:不中继,每个宿主直连记忆库", "去掉 DSH_MEMORY_RELAY=off 就会中继"
        )
    else:
        yield Check("ok", "stdio 宿主", f"会中继到 {live.url}(不打开记忆库、不加载 SDK;--no-relay 可强制直连)")


def check_url_entry(entry: Configured) -> Check:
    """A URL host config: a real ``GET /health`` at its URL with the headers it holds."""
    from dsh_memory_mcp.cli import probe

    assert entry.url is not None
    title = f"宿主 {entry.host.name}"
    where = f"{entry.path}:{entry.name} → URL {entry.url}"
    redo = f"{PROG} setup {entry.host.id} --url {entry.url}"
    answer = probe.health(entry.url, dict(entry.headers), timeout=HEALTH_TIMEOUT * 2)
    if answer.state == "ok":
        return Check("ok", title, f"{where}(令牌有效,serve v{answer.data.get('version', '?')} 在应答)")
    if answer.state == "unauthorized":
        what = "令牌已失效" if entry.headers else "条目没有 Authorization 头"
        return Check(
            "fail",
            title,
            f"{where};serve 在应答,但{what}({answer.detail}):serve 换过令牌(--new-token)或连的是另一个存储目录的 serve",
            f"重新运行 {redo}",
        )
    if answer.state == "down":
        return Check(
            "warn",
            title,
            f"{where};现在没有 serve 在应答({answer.detail}),宿主连不上",
            f"启动 serve({PROG} serve,或 {PROG} setup --serve 让它登录时自动启动)",
        )
    return Check(
        "warn", title, f"{where};应答的不是 dsh-memory-mcp serve({answer.detail})", f"检查地址,或重新运行 {redo}"
    )
