"""`dsh-memory-mcp serve`: flags → settings → `transports.http.serve_http`, with Chinese diagnostics;
and `dsh-memory-mcp web` (`login_link`): a fresh one-time login link for the running serve's page.

Exit codes: 0 after SIGINT/SIGTERM (the drain), 1 start-up failure (another `serve` owns the store,
the port is taken, the store is unusable), 2 usage error or an unsafe bind (non-loopback address
without `DSH_MEMORY_TOKEN`). The SDK is imported only here, when `serve` actually runs.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib
import json
import urllib.error
import urllib.request
from typing import Any, TextIO

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import diagnostics, logs
from dsh_memory_mcp.cli.messages import N_, t
from dsh_memory_mcp.cli.output import EXIT_OK, EXIT_STARTUP, EXIT_USAGE, PROG, describe, write_stderr_lines
from dsh_memory_mcp.cli.parser import Invocation
from dsh_memory_mcp.cli.runtime import log_settings

_ADDRESS_ERRORS = {
    errno.EADDRINUSE: N_("端口已被占用"),
    errno.EACCES: N_("没有权限监听这个端口"),
    errno.EADDRNOTAVAIL: N_("本机没有这个地址"),
}


def run(invocation: Invocation) -> int:
    """Serve until SIGINT/SIGTERM; returns the exit code."""
    debug = bool(config.read("DSH_MEMORY_DEBUG"))
    logs.configure_stderr_logging(debug)
    try:
        return _run(invocation, debug)
    finally:
        logs.remove_handlers()


def _run(invocation: Invocation, debug: bool) -> int:
    raw_port = invocation.options.get("port")
    port: int | None = None
    if isinstance(raw_port, str):
        if not raw_port.strip().isdigit() or not 0 <= int(raw_port) <= 65535:
            write_stderr_lines(
                [
                    t("❌ 参数错误:--port 必须是 0~65535 之间的整数(收到 {port})", port=raw_port),
                    t("⇒ 用 {prog} {command} --help 查看用法", command="serve"),
                ]
            )
            return EXIT_USAGE
        port = int(raw_port)
    host = invocation.options.get("host")
    try:
        settings = config.resolve_settings(store_dir=invocation.store_dir, project_dir=invocation.project_dir)
        serve = config.resolve_serve_settings(host=host if isinstance(host, str) else None, port=port)
    except Exception as exc:
        diagnostics.report_unexpected(exc, debug, started=False)
        return EXIT_STARTUP
    rotate = invocation.options.get("new_token") is True
    if serve.token is None:
        kept = _kept_token(settings.store_dir, rotate=rotate)
        if kept is None:
            return EXIT_STARTUP
        serve = dataclasses.replace(serve, kept_token=kept)
    elif rotate:
        write_stderr_lines(
            [
                t("❌ 参数错误:设了 DSH_MEMORY_TOKEN 时 --new-token 不起作用(令牌就是它的值)"),
                t("⇒ 换令牌就改 DSH_MEMORY_TOKEN 的值;要用 serve 自己保存的令牌就去掉这个变量"),
            ]
        )
        return EXIT_USAGE
    try:
        http = importlib.import_module("dsh_memory_mcp.transports.http")
    except Exception as exc:
        diagnostics.report_import_problem(diagnostics.ImportProblem(exc), debug)
        return EXIT_STARTUP

    def announce(login_url: str) -> None:
        # Straight to stderr, not through the logger: even a one-time code stays out of the log file.
        write_stderr_lines([t("网页登录链接(只能用一次,10 分钟内有效;新链接:{prog} web):{url}", url=login_url)])

    try:
        http.check_bind(serve)
        logs.configure_file_logging()
        log_settings(settings)
        for problem in serve.warnings:
            logs.log.warning("⚠️ %s", problem)
        http.serve_http(settings, serve, route_factories=_web_routes(), on_started=announce)
    except http.ServeRefused as refused:
        for line in refused.lines:
            logs.log.error("%s", line)
        return int(refused.code)
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        return _failure(exc, settings, serve, debug)
    return EXIT_OK


def login_link(invocation: Invocation, settings: config.Settings, *, out: TextIO, err: TextIO) -> int:
    """``dsh-memory-mcp web``: ask this store's running serve (found by its ``serve.json``, with the
    token in it) for a one-time login code and print the page's link with it on stdout."""
    from dsh_memory_mcp.transports import relay

    def say(line: str) -> None:  # a person's own command: no program prefix
        err.write(line + "\n")

    found, why = relay.find_serve(settings.store_dir)
    if found is None:
        say(t("❌ 没有正在运行的 serve 可以登录({why})", why=why))
        say(t("⇒ 先启动它:{prog} serve --store-dir {store},或 {prog} setup --serve", store=settings.store_dir))
        return EXIT_STARTUP
    base = found.info.url.rsplit("/mcp", 1)[0]
    request = urllib.request.Request(
        base + "/api/login-code",
        data=b"{}",
        headers={"Authorization": f"Bearer {found.info.token}", "Content-Type": "application/json"},
        method="POST",
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            answer = json.loads(response.read(64 * 1024).decode("utf-8"))
        code = answer["code"]
        if not (isinstance(code, str) and code.isascii() and code.isprintable() and 0 < len(code) <= 200):
            raise ValueError(code)
        minutes = int(answer["lifetimeSecs"]) // 60
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problem = f"HTTP {exc.code}" if isinstance(exc, urllib.error.HTTPError) else describe(exc)
        say(t("❌ serve({url})没有给出登录链接:{problem}", url=base, problem=problem))
        say(t("⇒ 网页随 serve 一起提供;用与 serve 相同版本的 {prog} 再试,或重启 serve"))
        return EXIT_STARTUP
    out.write(f"{base}/#code={code}\n")
    say(t("只能用一次,{minutes} 分钟内有效;打开它就登录了网页(登录保持到 serve 停止或到期)", minutes=minutes))
    return EXIT_OK


def _kept_token(store_dir: str, *, rotate: bool) -> str | None:
    """The token this store's serve keeps across restarts (made or, with `rotate`, replaced now);
    None after a diagnostic when the state dir cannot hold it."""
    from dsh_memory_mcp.cli import serve_token

    try:
        kept = serve_token.keep(store_dir, rotate=rotate)
    except OSError as exc:
        write_stderr_lines(
            [
                t(
                    "❌ 启动失败:无法保存令牌({path}:{why})",
                    path=serve_token.path_for(store_dir),
                    why=exc.strerror or exc,
                ),
                t("⇒ 让用户状态目录可写,或设 DSH_MEMORY_TOKEN 指定令牌"),
            ]
        )
        return None
    lines = []
    if kept.replaced_because:
        lines.append(
            t(
                "⚠️ 没有沿用保存的令牌({why}),换了一个新的;用 setup --url 的宿主配置需要重新运行 setup --url",
                why=kept.replaced_because,
            )
        )
    if rotate:
        lines.append(t("已换新令牌(--new-token):旧令牌立即失效;用 {prog} setup --url … 更新 URL 型宿主的配置"))
    elif kept.created:
        lines.append(t("令牌已保存在 {path}(0600),serve 重启后沿用;{prog} serve --new-token 换一个", path=kept.path))
    else:
        lines.append(t("令牌沿用 {path}(serve 重启后不变;{prog} serve --new-token 换一个)", path=kept.path))
    write_stderr_lines(lines)
    return kept.token


def _web_routes() -> list[Any]:
    """The web page's routes (`transports.web`); a broken page must not keep `/mcp` from serving."""
    try:
        web = importlib.import_module("dsh_memory_mcp.transports.web")
    except Exception as exc:
        logs.log.warning("⚠️ 网页模块加载失败(%s),本次只提供 /mcp", exc)
        return []
    return [web.web_routes]


def _failure(exc: Exception, settings: config.Settings, serve: config.ServeSettings, debug: bool) -> int:
    failure = diagnostics.store_failure(exc, settings)
    if failure is not None:
        diagnostics.report_store_failure(failure[0], failure[1], settings, exc)
        return EXIT_STARTUP
    if isinstance(exc, OSError) and exc.errno in _ADDRESS_ERRORS:
        logs.log.error("❌ 启动失败:无法监听 %s:%d(%s)", serve.host, serve.port, t(_ADDRESS_ERRORS[exc.errno]))
        logs.log.error("⇒ 换一个端口:%s serve --port <端口>(0 = 任取空闲端口),或停掉占用它的程序", PROG)
        return EXIT_STARTUP
    diagnostics.report_unexpected(exc, debug, started=False)
    return EXIT_STARTUP
