"""Running the stdio server and owning its process: SIGINT/SIGTERM end it cleanly with exit 0
(`StdinRelay`, `SignalGuard`), leftover threads cannot keep a dead server alive (`arm_exit_watchdog`),
and the SDK is imported only when the server actually starts (`load_serve`).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from dsh_memory_mcp import __version__, config
from dsh_memory_mcp.cli import diagnostics, logs
from dsh_memory_mcp.cli.messages import t
from dsh_memory_mcp.cli.output import EXIT_OK, EXIT_STARTUP, flush_std, write_stderr_lines
from dsh_memory_mcp.cli.parser import Invocation
from dsh_memory_mcp.service.render import PROJECT_SOURCES
from dsh_memory_mcp.store import fileio

#: After serve() is over, how long interpreter shutdown may wait for leftover non-daemon threads
#: before the process exits anyway (see `arm_exit_watchdog`).
EXIT_GRACE_SECONDS = 1.0

ServeFn = Callable[[config.Settings], None]

_cli_log = logging.getLogger("dsh_memory_mcp.cli")


# --------------------------------------------------------------------------------------------
# Signals and exit
# --------------------------------------------------------------------------------------------


#: After the first SIGINT/SIGTERM, how long the graceful stop (end of stdin) may take before the
#: main thread gets a KeyboardInterrupt.
STOP_ESCALATION_SECONDS = 5.0
#: After the first SIGINT/SIGTERM, when the process exits no matter what (a shutdown that hangs,
#: e.g. an event loop waiting for a task that ignores cancellation, must not outlive the request).
HARD_EXIT_SECONDS = 10.0

_SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class StdinRelay:
    """Feeds the server's stdin (fd 0) from the real stdin through a pipe this process owns.

    The SDK reads stdin in a thread that cancellation cannot interrupt, so while the host keeps stdin
    open no signal could end the event loop; closing our pipe instead ends the input, and the server
    shuts down through its normal path, as when the host closes stdin. POSIX only (`select`).
    """

    def __init__(self, source: int, sink: int, wake_r: int, wake_w: int) -> None:
        self._source = source
        self._sink = sink
        self._wake_r = wake_r
        self._wake_w = wake_w

    @classmethod
    def install(cls) -> StdinRelay | None:
        if os.name != "posix":
            return None
        try:
            source = os.dup(0)
        except OSError:  # no stdin at all
            return None
        try:
            read_end, write_end = os.pipe()
            wake_r, wake_w = os.pipe()
            os.set_blocking(wake_w, False)
            os.dup2(read_end, 0)  # fd 0 is now our pipe; sys.stdin still wraps fd 0
            os.close(read_end)
        except OSError:  # pragma: no cover - fd exhaustion
            os.close(source)
            return None
        relay = cls(source, write_end, wake_r, wake_w)
        threading.Thread(target=relay._pump, name="dsh-memory-mcp-stdin-relay", daemon=True).start()
        return relay

    def _pump(self) -> None:
        import select

        try:
            while True:
                ready, _, _ = select.select([self._source, self._wake_r], [], [])
                if self._wake_r in ready:
                    break
                try:
                    data = os.read(self._source, 65536)
                except BlockingIOError:  # a host handed us a non-blocking stdin: not an end of input
                    continue
                if not data:
                    break
                fileio.write_all(self._sink, data)
        except (OSError, ValueError):
            pass
        finally:
            for fd in (self._sink, self._source, self._wake_r):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def stop(self) -> None:
        """End the server's input. Async-signal-safe: a single non-blocking write."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass


class SignalGuard:
    """SIGINT and SIGTERM while the server runs: a clean stop, exit code 0. The 1st ends stdin
    through the relay; without one, or after `STOP_ESCALATION_SECONDS`, KeyboardInterrupt in the
    main thread. A 3rd signal, or `HARD_EXIT_SECONDS` after the 1st, ends the process at once.
    """

    def __init__(self) -> None:
        self.count = 0
        self.relay: StdinRelay | None = None
        self._previous: dict[int, _SignalHandler] = {}
        self._timers: list[threading.Timer] = []

    def install(self) -> None:
        self._previous = _on_stop_signals(self._handle)

    def restore(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        for sig, previous in self._previous.items():
            try:
                signal.signal(sig, previous)
            except (ValueError, OSError, TypeError):  # pragma: no cover
                pass
        self._previous.clear()

    def _later(self, seconds: float, action: Callable[..., object], *args: object) -> None:
        timer = threading.Timer(seconds, action, args=args)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1:
            self._later(HARD_EXIT_SECONDS, _hard_exit)
            if self.relay is not None:
                self.relay.stop()
                self._later(STOP_ESCALATION_SECONDS, _interrupt_main, signum)
                return
        if self.count <= 2:
            raise KeyboardInterrupt
        flush_std()
        os._exit(EXIT_OK)


def _hard_exit() -> None:
    write_stderr_lines([t("⚠️ 收到退出信号 {secs} 秒后仍未停下,强制退出", secs=f"{HARD_EXIT_SECONDS:g}")])
    flush_std()
    os._exit(EXIT_OK)


def _interrupt_main(signum: int) -> None:
    import _thread

    _thread.interrupt_main(signal.Signals(signum))  # our handler again, in the main thread: escalation


def _on_stop_signals(handler: Callable[[int, FrameType | None], None]) -> dict[int, _SignalHandler]:
    """`handler` for SIGINT and SIGTERM, except one ignored (started in the background by a shell: keep
    ignoring it); the handlers it replaced. Only the main thread can install one."""
    previous: dict[int, _SignalHandler] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):  # both defined on every platform, Windows included
        try:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass
    return previous


def _quiet_late_signals(code: int) -> None:
    """Once serve() is over, a further SIGINT/SIGTERM ends the process at once with `code`
    (no KeyboardInterrupt traceback from inside interpreter shutdown)."""

    def _exit_now(signum: int, frame: FrameType | None) -> None:
        flush_std()
        os._exit(code)

    _on_stop_signals(_exit_now)


def arm_exit_watchdog(code: int) -> None:
    """Make sure the process really exits after serve() returned: interpreter shutdown waits for
    every non-daemon thread, and one that never ends (the SDK's stdin reader without the relay, a
    stuck worker) would keep a dead server alive. Once the main thread has finished, leftover
    threads get `EXIT_GRACE_SECONDS`, then `os._exit`. Inert while the main thread lives.
    """
    main_thread = threading.main_thread()

    def leftovers() -> list[threading.Thread]:
        me = threading.current_thread()
        return [t for t in threading.enumerate() if t not in (main_thread, me) and not t.daemon and t.is_alive()]

    if not leftovers():
        return

    def watch() -> None:
        while main_thread.is_alive():
            time.sleep(0.05)
        deadline = time.monotonic() + EXIT_GRACE_SECONDS
        for thread in leftovers():
            thread.join(max(0.0, deadline - time.monotonic()))
        if leftovers():
            flush_std()
            os._exit(code)

    threading.Thread(target=watch, name="dsh-memory-mcp-exit-watchdog", daemon=True).start()


class StartedFlag(logging.Filter):
    """Notices the server's `已启动 …` line, so a later crash is not called a start-up failure."""

    def __init__(self) -> None:
        super().__init__()
        self.started = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.started and isinstance(record.msg, str) and record.msg.startswith("已启动"):
            self.started = True
        return True


def load_serve() -> ServeFn:
    """Import `dsh_memory_mcp.transports.mcp_server` (the only module that imports the SDK) and return `serve`."""
    try:
        module = importlib.import_module("dsh_memory_mcp.transports.mcp_server")
    except Exception as exc:
        raise diagnostics.ImportProblem(exc) from exc
    serve = getattr(module, "serve", None)
    if not callable(serve):
        name = "dsh_memory_mcp.transports.mcp_server"
        raise diagnostics.ImportProblem(ImportError(t("{module} 里没有 serve()", module=name), name=name))
    return serve  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# Running the stdio server
# --------------------------------------------------------------------------------------------


def run_server(invocation: Invocation, serve: ServeFn | None) -> int:
    owns_process = serve is None
    guard = SignalGuard()
    guard.install()
    started = StartedFlag()
    code = EXIT_STARTUP
    try:
        try:
            code = _start(invocation, serve, started, guard)
        except KeyboardInterrupt:
            code = EXIT_OK
            _cli_log.info("收到退出信号,已停止")
    except KeyboardInterrupt:  # a second signal while reporting the first
        code = EXIT_OK
    finally:
        guard.restore()
        if owns_process:
            _quiet_late_signals(code)
            arm_exit_watchdog(code)
        logs.remove_handlers(only_files=True)
    return code


def log_settings(settings: config.Settings) -> None:
    """The start-up lines every server prints (stdio and `serve`): what is actually in effect."""
    for problem in settings.warnings:  # an invalid value silently becoming the default would mislead
        _cli_log.warning("⚠️ %s", problem)
    _cli_log.info("store-dir = %s", settings.store_dir)
    _cli_log.info(
        "project = %s(project 作用域 = project:%s;来源:%s)",
        settings.project_dir,
        settings.project_dir,
        PROJECT_SOURCES[settings.project_source],
    )
    _cli_log.info("默认保存作用域 = %s", settings.default_save_scope)
    if settings.store_dir_is_default:
        _cli_log.info("ℹ️ 未指定 --store-dir / DSH_MEMORY_STORE_DIR,使用默认目录:%s", settings.store_dir)
        _cli_log.info("⇒ 请确认它与 DSH 记忆插件的 storeDir 是同一个目录,否则两边看到的是两份互不相通的记忆。")


def _start(invocation: Invocation, serve: ServeFn | None, started: StartedFlag, guard: SignalGuard) -> int:
    debug = bool(config.read("DSH_MEMORY_DEBUG"))
    logs.configure_stderr_logging(debug, started)
    try:
        settings = config.resolve_settings(store_dir=invocation.store_dir, project_dir=invocation.project_dir)
    except Exception as exc:
        diagnostics.report_unexpected(exc, debug, started=False)
        return EXIT_STARTUP
    logs.configure_file_logging()
    log_settings(settings)
    if serve is None:
        relayed = _try_relay(invocation, settings, guard)
        if relayed is not None:
            return relayed
        try:
            serve = load_serve()
        except diagnostics.ImportProblem as problem:
            diagnostics.report_import_problem(problem, settings.debug)
            return EXIT_STARTUP
        # We own the process: signals end the session through the stdin relay (see StdinRelay).
        guard.relay = StdinRelay.install()
    try:
        serve(settings)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        leaves = list(diagnostics.leaves(exc))
        if leaves and all(diagnostics.is_interrupt(leaf) for leaf in leaves):
            raise KeyboardInterrupt from exc
        for leaf in leaves:
            failure = diagnostics.store_failure(leaf, settings)
            if failure is not None:
                diagnostics.report_store_failure(failure[0], failure[1], settings, exc)
                return EXIT_STARTUP
        culprit = next((leaf for leaf in leaves if not diagnostics.is_interrupt(leaf)), exc)
        diagnostics.report_unexpected(culprit, settings.debug, started=started.started, top=exc)
        return EXIT_STARTUP
    if guard.count:
        _cli_log.info("收到退出信号,已停止")
    else:
        _cli_log.debug("stdin 已关闭,正常退出")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Relaying to a running `serve` instead of opening the store
# --------------------------------------------------------------------------------------------


def _try_relay(invocation: Invocation, settings: config.Settings, guard: SignalGuard) -> int | None:
    """Relay to the `serve` that `<store>/serve.json` names, if it answers; None → start directly.
    Decided before the SDK is imported, so a relayed start costs a fraction of a direct one."""
    if invocation.no_relay or not settings.relay:
        _cli_log.info("连接方式 = direct(%s)", "--no-relay" if invocation.no_relay else "DSH_MEMORY_RELAY=off")
        return None
    from dsh_memory_mcp.transports import relay

    found, why = relay.find_serve(settings.store_dir)
    if found is None:
        _cli_log.info("连接方式 = direct(%s)", why)
        return None
    _cli_log.info("连接方式 = relay(%s)", found.info.url)
    direct_argv = ["--store-dir", settings.store_dir]
    if invocation.project_dir is not None:
        direct_argv += ["--project", settings.project_dir]
    guard.relay = StdinRelay.install()
    # The success line `--help` names, as a direct start prints it (transports.mcp_server).
    _cli_log.info("已启动 dsh-memory-mcp v%s(stdio)", __version__)
    return relay.Relay(
        found.info,
        deadline=found.deadline,
        project_dir=settings.project_dir,
        project_source=settings.project_source,
        direct_argv=direct_argv,
        stdin=sys.stdin.buffer,
        stdout=sys.stdout.buffer,
        log=_cli_log.warning,
    ).run()
