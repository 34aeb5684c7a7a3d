# envhost's Python driver. The host embeds this file and runs it as
#     python3 -u -c <bootstrap> <this source> REQUEST_FD REPLY_FD
# where the bootstrap compiles this source under the name <envhost-driver>.
# It owns the agent's namespace (a fresh `__main__` module) and runs each
# piece of code it is sent as a REPL would. Code arrives as one JSON line on
# REQUEST_FD; when the code is done, one JSON line goes back on REPLY_FD with
# the status, the working directory and the variables. The agent's output
# (print, stderr, warnings, tracebacks, C code and subprocesses writing to
# fds 1 and 2) goes to stdout/stderr, which the host reads as one stream:
# control messages never travel there, so no output can be mistaken for one.
# The driver must not print anything of its own on stdout/stderr, and must
# work on every Python from 3.8 on.

import ast
import builtins
import json
import linecache
import os
import signal
import sys
import types

import __future__

DRIVER_GLOBALS = globals()
DRIVER_PID = os.getpid()
REQUEST_FD = int(sys.argv[2])
REPLY_FD = int(sys.argv[3])
sys.argv = [""]

# The user's subprocesses must not inherit the control pipes.
os.set_inheritable(REQUEST_FD, False)
os.set_inheritable(REPLY_FD, False)
requests = os.fdopen(REQUEST_FD, "rb")

for _stream in (sys.stdout, sys.stderr):
    try:
        _stream.reconfigure(encoding="utf-8", errors="backslashreplace")
    except Exception:
        pass

try:
    import faulthandler

    # A crash in C code (a segfault) then leaves a Python traceback in the
    # output before the host reports the signal.
    faulthandler.enable()
except Exception:
    pass

# The agent's namespace: a module of its own, so that `__name__` is
# "__main__", pickle finds classes defined there, and none of the driver's
# names are visible.
main_module = types.ModuleType("__main__")
main_module.__dict__.update(
    {"__builtins__": builtins, "__spec__": None, "__package__": None}
)
sys.modules["__main__"] = main_module
namespace = main_module.__dict__

INPUT_MESSAGE = (
    "input() is not available: envhost's python has no stdin for anyone to "
    "type into. Put the value in the code instead (e.g. name = 'Ada')."
)


def no_input(prompt=""):
    raise EOFError(INPUT_MESSAGE)


builtins.input = no_input

running_user_code = False


def on_sigint(signum, frame):
    # The host sends SIGINT to interrupt a command that ran out of time.
    # Between commands it means nothing and must not kill the driver.
    if running_user_code:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_sigint)

future_flags = 0
FUTURE_MASK = 0
for _name in __future__.all_feature_names:
    FUTURE_MASK |= getattr(__future__, _name).compiler_flag


def reply(message):
    data = json.dumps(message)
    if "\\ud" in data:
        # Maybe a lone surrogate (an undecodable path under
        # surrogateescape), which the host's JSON parser refuses: replace
        # it. Rare, so the fast ASCII encoding above is tried first.
        data = json.dumps(message, ensure_ascii=False)
    message = memoryview(data.encode("utf-8", "replace") + b"\n")
    while message:
        # A signal can cut a write to a pipe short.
        message = message[os.write(REPLY_FD, message) :]


def strip_driver_frames(exc, seen=None):
    """Removes the driver's own frames from a traceback and its chain."""
    if seen is None:
        seen = set()
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    kept = []
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals is not DRIVER_GLOBALS:
            kept.append(tb)
        tb = tb.tb_next
    for earlier, later in zip(kept, kept[1:]):
        earlier.tb_next = later
    if kept:
        kept[-1].tb_next = None
    exc.__traceback__ = kept[0] if kept else None
    strip_driver_frames(exc.__cause__, seen)
    strip_driver_frames(exc.__context__, seen)


def show_exception(exc):
    strip_driver_frames(exc)
    sys.last_type, sys.last_value, sys.last_traceback = (
        type(exc),
        exc,
        exc.__traceback__,
    )
    if hasattr(sys, "last_exc"):
        sys.last_exc = exc
    # As the interactive interpreter does (code.InteractiveInterpreter):
    # the traceback module reads source lines from linecache, where the
    # agent's code is; a custom sys.excepthook is honoured.
    if sys.excepthook is not sys.__excepthook__:
        try:
            sys.excepthook(type(exc), exc, exc.__traceback__)
            return
        except BaseException:
            pass
    import traceback

    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    sys.stderr.write("".join(lines))


def show_syntax_error(err, lines, hint=None):
    if err.text is None and err.lineno and 0 < err.lineno <= len(lines):
        err.text = lines[err.lineno - 1]
    err.__traceback__ = None
    show_exception(err)
    if hint:
        sys.stderr.write(hint + "\n")


TOP_LEVEL_AWAIT_HINT = (
    "Top-level await is not supported here. Put the code in an async "
    "function and run it with asyncio.run(), e.g.:\n"
    "    async def main():\n"
    "        ...\n"
    "    asyncio.run(main())"
)


def compile_cell(source, filename):
    """The code objects to run, in order: everything but a trailing
    expression, then that expression compiled so that its value is shown
    (sys.displayhook), as in the interactive interpreter."""
    global future_flags
    tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST | future_flags, True)
    body = tree.body
    if body and isinstance(body[-1], ast.Expr):
        head = ast.Module(body=body[:-1], type_ignores=[])
        head_code = compile(head, filename, "exec", future_flags, True)
        flags = future_flags | (head_code.co_flags & FUTURE_MASK)
        tail = ast.Interactive(body=body[-1:])
        codes = [head_code, compile(tail, filename, "single", flags, True)]
    else:
        codes = [compile(tree, filename, "exec", future_flags, True)]
    for code in codes:
        future_flags |= code.co_flags & FUTURE_MASK
    return codes


def uses_top_level_await(source, filename):
    flag = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
    if not flag:
        return False
    try:
        code = compile(source, filename, "exec", future_flags | flag, True)
    except Exception:
        return False
    return bool(code.co_flags & 0x80)  # CO_COROUTINE


def run(source, number):
    """Runs one piece of code; returns "ok" or "error"."""
    global running_user_code
    filename = "<python-input-%d>" % number
    lines = source.splitlines(True)
    # Tracebacks, warnings and inspect.getsource() read the code from here.
    linecache.cache[filename] = (len(source), None, lines, filename)
    try:
        codes = compile_cell(source, filename)
    except (SyntaxError, ValueError, OverflowError) as err:
        if isinstance(err, SyntaxError):
            hint = None
            if uses_top_level_await(source, filename):
                hint = TOP_LEVEL_AWAIT_HINT
            show_syntax_error(err, lines, hint)
        else:
            show_exception(err)
        return "error"
    try:
        running_user_code = True
        for code in codes:
            exec(code, namespace)
        running_user_code = False
    except SystemExit:
        running_user_code = False
        raise
    except BaseException as exc:
        running_user_code = False
        show_exception(exc)
        return "error"
    finally:
        running_user_code = False
    return "ok"


def type_name(value):
    """The type shown next to a variable: a class shows its own name, anything else
    the name of its type (ndarray, DataFrame, Series, int, ...)."""
    kind = type(value)
    try:
        if issubclass(kind, type):
            name = value.__name__
            if isinstance(name, str):
                return name
        return kind.__name__
    except Exception:
        return "object"


def variables():
    """The agent's variables in namespace order, without private names,
    modules and builtins."""
    found = []
    builtin_names = builtins.__dict__
    missing = object()
    for name, value in list(namespace.items()):
        if not isinstance(name, str) or name.startswith("_"):
            continue
        if issubclass(type(value), types.ModuleType):
            continue
        if builtin_names.get(name, missing) is value:
            continue
        found.append([name, type_name(value)])
    return found


def working_directory():
    try:
        return os.getcwd()
    except OSError as err:
        return "(unavailable: %s)" % (err.strerror or err)


def flush_user_streams():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


def serve():
    number = 0
    reply({"type": "ready", "version": sys.version.split()[0], "pid": DRIVER_PID})
    while True:
        line = requests.readline()
        if not line:
            return  # the host closed the pipe: it is done with us
        number += 1
        try:
            source = json.loads(line.decode("utf-8"))["code"]
        except Exception as err:
            sys.stderr.write("envhost driver: unreadable request (%s)\n" % err)
            source = None
        status = run(source, number) if isinstance(source, str) else "error"
        if os.getpid() != DRIVER_PID:
            # A fork made by the agent's code that fell through to here: it
            # must neither answer the host nor read its requests.
            flush_user_streams()
            os._exit(0)
        flush_user_streams()
        try:
            names = variables()
        except Exception:
            names = []
        reply(
            {
                "type": "done",
                "status": status,
                "cwd": working_directory(),
                "variables": names,
            }
        )


serve()
