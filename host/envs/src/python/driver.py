# envhost's Python driver. The host embeds this file and runs it as
#     python3 -u -c <bootstrap> <this source> REQUEST_FD REPLY_FD RECORD_FD
# where the bootstrap compiles this source under the name <envhost-driver>.
# It owns the agent's namespace (a fresh `__main__` module) and runs each
# piece of code it is sent as a REPL would.
#
# The conversation with the host is authenticated, because the agent's code
# runs in this same interpreter and can find these descriptors: the first
# line on REQUEST_FD is a key (hex) read before any of the agent's code
# runs; every later line is a request `TAG JSON` whose tag (keyed BLAKE2b,
# personalization "envhost-request", in hex) and strictly growing sequence
# number are checked; every reply is `TAG JSON` too (personalization
# "envhost-reply"), naming the request it answers, written in one write as
# a line on the REPLY_FD pipe, with a newline before it (what someone else
# wrote without one ends there) and at most PIPE_BUF bytes long (the kernel
# never interleaves such a write with another); the rare `done` too long
# for that is one record on the RECORD_FD socket (SOCK_SEQPACKET), which
# also brings the stdin pipes the host passes. Lines that fail the checks
# are refused and counted in the next reply. The key lives only in serve()'s frame: code that walks the
# driver's frames or memory can still impersonate it (docs/security.md).
#
# The agent's output (print, stderr, warnings, tracebacks, C code and
# subprocesses writing to fds 1 and 2) goes to stdout/stderr, which the host
# reads as one stream: control messages never travel there, so no output
# can be mistaken for one. The driver must not print anything of its own on
# stdout/stderr (except the one line that says its channel was taken), and
# must work on every Python from 3.8 on.

import ast
import builtins
import fcntl
import json
import linecache
import os
import resource
import signal
import sys
import types

import __future__

# The tag's primitives without importing hashlib and hmac, which load
# OpenSSL (about 10 ms at every start) for nothing the driver uses.
try:
    from _blake2 import blake2b
except ImportError:
    from hashlib import blake2b
try:
    from _operator import _compare_digest as same_tag
except ImportError:
    from hmac import compare_digest as same_tag

DRIVER_GLOBALS = globals()
DRIVER_PID = os.getpid()
_request_fd, _reply_fd, _record_fd = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.argv = [""]


def move_high(fd, floor):
    """The channel at a high descriptor number, not inherited by the code's
    subprocesses. The code's own files get the lowest free numbers, so even
    code that closed the driver's descriptors would have to open about a
    thousand files before one of them got a channel's number (and the
    driver wrote into it or read from it)."""
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    except OSError:
        os.set_inheritable(fd, False)
        return fd
    os.close(fd)
    return moved


try:
    _soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
except Exception:
    _soft = 1024
_floor = max(3, (_soft if 0 < _soft < 1024 else 1024) - 16)
REQUEST_FD = move_high(_request_fd, _floor)
REPLY_FD = move_high(_reply_fd, _floor)
RECORD_FD = move_high(_record_fd, _floor)
requests = os.fdopen(REQUEST_FD, "rb")

# The longest line written to the reply pipe in one piece: a write of up to
# PIPE_BUF bytes to a pipe is never interleaved with another's.
try:
    PIPE_BUF = os.fpathconf(REPLY_FD, "PC_PIPE_BUF")
except (OSError, ValueError):
    PIPE_BUF = 512  # the least POSIX allows
# Longer variable lists go ahead in parts of at most this many bytes of
# JSON, so that each is one line.
PART_BYTES = PIPE_BUF - 200


class ChannelLost(Exception):
    """The code closed or replaced one of the driver's descriptors."""


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
    "type into. Put the value in the code instead (e.g. name = 'Ada'), or "
    "send the command with yield_ms so that it can be answered with input."
)

# A command sent with yield_ms reads, as fd 0, a pipe the agent types into:
# the host passes its read end (SCM_RIGHTS, with the request's number) on
# the reply socket with the first such command, and again after Ctrl-D
# closed it. Every other command reads /dev/null, so that input() fails at
# once instead of waiting for nobody. fd 0 is switched only when the kind of
# command changes; what one command leaves unread stays for the next.
input_open = False
DEVNULL_FD = move_high(os.open(os.devnull, os.O_RDONLY), _floor)
stdin_pipe = None
stdin_on_pipe = False
reply_socket = None


def agent_input(prompt=""):
    """input(), which tells the host (with an untagged hint it checks in
    /proc) that the command now waits for a line."""
    if not input_open:
        raise EOFError(INPUT_MESSAGE)
    flush_user_streams()
    if prompt:
        sys.stdout.write(str(prompt))
    flush_user_streams()
    try:
        os.write(REPLY_FD, b"\ninput-hint\n")
    except OSError:
        pass
    line = sys.stdin.readline()
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line


builtins.input = agent_input


def take_input_fd(seq):
    """The stdin the host passed for request `seq`, or None. Older ones
    (for requests that never ran) are closed."""
    global reply_socket
    import array
    import socket

    if reply_socket is None:
        reply_socket = socket.socket(fileno=RECORD_FD)
    found = None
    while found is None:
        try:
            message, ancillary, _flags, _address = reply_socket.recvmsg(
                32, socket.CMSG_SPACE(4 * array.array("i").itemsize), socket.MSG_DONTWAIT
            )
        except OSError:
            break  # nothing (more) was passed
        if not message and not ancillary:
            break
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        for fd in fds:
            if found is None and message == str(seq).encode():
                found = fd
            else:
                os.close(fd)
    return found


def take_stdin_pipe(seq):
    """Keeps the pipe passed with request `seq` as the one to read."""
    global stdin_pipe, stdin_on_pipe
    fd = take_input_fd(seq)
    if fd is None:
        return
    if stdin_pipe is not None:
        os.close(stdin_pipe)
    stdin_pipe = move_high(fd, _floor)
    stdin_on_pipe = False


def use_stdin(pipe):
    """fd 0 for the next command: the pipe, or /dev/null."""
    global stdin_on_pipe
    if pipe != stdin_on_pipe:
        os.dup2(stdin_pipe if pipe else DEVNULL_FD, 0)
        stdin_on_pipe = pipe


# Figures. matplotlib is forced onto its non-interactive Agg backend (there
# is no display, and a GUI backend would block or fail); subprocesses of the
# code inherit the setting. Figures shown with plt.show(), figures still
# open when a piece of code ends (as Jupyter's inline backend does) and a
# PIL image left as the value of a trailing expression are saved as PNG
# under <project>/.envhost/figures/ and named to the host in `done`.
# Nothing here imports matplotlib or PIL: the hooks act only once the code
# has imported them.
os.environ["MPLBACKEND"] = "agg"
PROJECT_DIR = os.getcwd()
FIGURES_DIR = os.path.join(PROJECT_DIR, ".envhost", "figures")
figures_saved = []  # paths saved by the running piece of code
figure_number = 0  # the last figure-N.png used (0: look in the folder first)
# PNG holds these modes as they are; any other is converted first.
PNG_MODES = ("1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA")


def figure_note(text):
    """A line in the command's output about a figure that could not be
    saved (the driver's only words on stderr besides a lost channel)."""
    try:
        sys.stderr.write("envhost: %s\n" % text)
    except Exception:
        pass


def open_figure_file():
    """A new file figure-N.png in the figures folder, opened for writing,
    and its path; None when the folder cannot be used. The folder must stay
    inside the project: a project that makes it a symlink to somewhere
    else gets no figures."""
    global figure_number
    try:
        os.makedirs(FIGURES_DIR, exist_ok=True)
        real = os.path.realpath(FIGURES_DIR)
        if not real.startswith(os.path.realpath(PROJECT_DIR) + os.sep):
            figure_note("%s leads outside the project; figures are not saved" % FIGURES_DIR)
            return None
        if figure_number == 0:
            for name in os.listdir(FIGURES_DIR):
                stem = name[len("figure-") : -len(".png")]
                if name.startswith("figure-") and name.endswith(".png") and stem.isdigit():
                    figure_number = max(figure_number, int(stem))
        for _attempt in range(1000):
            figure_number += 1
            path = os.path.join(FIGURES_DIR, "figure-%d.png" % figure_number)
            try:
                # "x": never through a file or symlink that is already there.
                return open(path, "xb"), path
            except FileExistsError:
                continue
    except OSError as err:
        figure_note("could not save a figure in %s: %s" % (FIGURES_DIR, err.strerror or err))
    return None


def save_figure(write):
    """Saves one picture with `write(file)`; True when it was saved."""
    opened = open_figure_file()
    if opened is None:
        return False
    stream, path = opened
    try:
        with stream:
            write(stream)
    except BaseException as err:
        # Never half a picture left behind, interrupted or not.
        try:
            os.unlink(path)
        except OSError:
            pass
        if not isinstance(err, Exception):
            raise
        figure_note("could not save a figure: %s: %s" % (type(err).__name__, err))
        return False
    figures_saved.append(path)
    return True


def save_open_figures():
    """Saves every open matplotlib figure, then closes them all (what
    plt.show() does here, and the end of every piece of code)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    try:
        from matplotlib._pylab_helpers import Gcf

        managers = Gcf.get_all_fig_managers()
    except Exception:
        return
    if not managers:
        return
    for manager in managers:
        figure = manager.canvas.figure
        save_figure(lambda stream: figure.savefig(stream, format="png"))
    try:
        pyplot.close("all")
    except Exception:
        pass


def save_figures_left_open():
    """Saves the figures a piece of code left open. Saving a big figure
    takes time: an interruption (a timeout) stops it as it would stop the
    code, instead of finding the driver deaf to SIGINT."""
    global running_user_code
    if "matplotlib.pyplot" not in sys.modules:
        return
    try:
        running_user_code = True
        save_open_figures()
        running_user_code = False
    except KeyboardInterrupt:
        running_user_code = False
        figure_note("interrupted while saving the figures left open")
    finally:
        running_user_code = False


def install_show(pyplot):
    """pyplot.show, replaced: the figures are saved instead of shown."""
    original = getattr(pyplot, "show", None)

    def show(*args, **kwargs):
        save_open_figures()

    if original is not None:
        show.__doc__ = original.__doc__
        show.__wrapped__ = original
    pyplot.show = show


class ShowingLoader:
    """matplotlib.pyplot's own loader, which then replaces its show()."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            install_show(module)
        except Exception:
            pass

    def __getattr__(self, name):
        return getattr(self.loader, name)


class PyplotFinder:
    """Finds matplotlib.pyplot as the other finders do, with a loader that
    hooks its show(); every other import goes by untouched."""

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if hasattr(spec.loader, "exec_module"):
                    spec.loader = ShowingLoader(spec.loader)
                return spec
        return None

    def invalidate_caches(self):
        pass


sys.meta_path.insert(0, PyplotFinder())


def show_value(value):
    """sys.displayhook: a PIL image is saved as a figure, anything else is
    shown as the interactive interpreter shows it."""
    image = sys.modules.get("PIL.Image")
    if image is not None and value is not None:
        try:
            is_image = isinstance(value, image.Image)
        except Exception:
            is_image = False
        if is_image:

            def write(stream):
                picture = value if value.mode in PNG_MODES else value.convert("RGBA")
                picture.save(stream, format="PNG")

            if save_figure(write):
                builtins._ = value
                return
    sys.__displayhook__(value)


sys.displayhook = show_value


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


def c_json_encoder():
    """Compact json.dumps without its Python wrapper, which builds a new C
    encoder for every call (about half of a small message's cost); json.dumps
    itself where the C encoder is missing or differs."""
    try:
        make = json.encoder.c_make_encoder
        chunks = make(None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
        dumps = lambda message: "".join(chunks(message, 0))
        sample = {"a": [1, "\u00e9\ud800", True, None]}
        if dumps(sample) == json.dumps(sample, separators=(",", ":")):
            return dumps
    except Exception:
        pass
    return json.dumps


dumps = c_json_encoder()
# json.loads without its Python wrapper (encoding detection, two regex
# matches): the scanner alone, and the check that nothing follows.
scan_json = json.JSONDecoder().scan_once


def parse_json(text):
    value, end = scan_json(text, 0)
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return value


def encode(message):
    data = dumps(message)
    if "\\ud" in data:
        # Maybe a lone surrogate (an undecodable path under
        # surrogateescape), which the host's JSON parser refuses: replace
        # it. Rare, so the fast ASCII encoding above is tried first.
        data = json.dumps(message, ensure_ascii=False)
    return data.encode("utf-8", "replace")


def send(macs, body):
    """Writes one sealed reply to the host: a line on the pipe, or a record
    on the socket when too long for one write to the pipe. Either is
    written whole (a signal cannot cut it short; EINTR is retried)."""
    mac = macs[1].copy()
    mac.update(body)
    line = b"\n" + mac.hexdigest().encode() + b" " + body + b"\n"
    try:
        if len(line) <= PIPE_BUF:
            os.write(REPLY_FD, line)
        else:
            os.write(RECORD_FD, line[1:-1])
    except OSError:
        raise ChannelLost("reply")


def reply(macs, message):
    send(macs, encode(message))


def next_request(macs, last_seq):
    """The next request the host really sent, and how many lines were
    refused before it (forged, garbled or replayed). None when the host
    closed the pipe."""
    refused = 0
    while True:
        try:
            line = requests.readline()
        except OSError:
            raise ChannelLost("request")
        if not line:
            return None, refused
        line = line.rstrip(b"\n")
        if not line:
            continue  # the newline that starts every request
        tag, _, body = line.partition(b" ")
        mac = macs[0].copy()
        mac.update(body)
        if not same_tag(tag, mac.hexdigest().encode()):
            refused += 1
            continue
        try:
            message = parse_json(body.decode("utf-8"))
            seq = message["seq"]
        except Exception:
            refused += 1
            continue
        if not isinstance(seq, int) or seq <= last_seq:
            refused += 1  # a replay of an earlier request
            continue
        return message, refused


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


# First words of compound statements. One of these on one line goes the
# full way: an interactive compile refuses it on some versions and on others
# would show the values inside it (`for i in range(3): i`), as the REPL does
# and a cell must not.
COMPOUND_STARTS = frozenset(
    ("if", "elif", "else", "for", "while", "with", "try", "except", "finally", "def", "class", "async", "match", "case")
)


def one_simple_statement(source):
    """Whether `source` can only be one simple statement: one line, no `;`,
    not starting with a compound statement's keyword. Such a cell compiles
    as one interactive statement with the same meaning: its value shown if
    it is an expression, nothing otherwise."""
    text = source.strip()
    if not text or "\n" in text or "\r" in text or ";" in text:
        return False
    end = 0
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return text[:end] not in COMPOUND_STARTS


def compile_cell(source, filename):
    """The code objects to run, in order: everything but a trailing
    expression, then that expression compiled so that its value is shown
    (sys.displayhook), as in the interactive interpreter."""
    global future_flags
    if one_simple_statement(source):
        # One compile instead of a syntax tree built as Python objects and
        # compiled from them: after an idle pause the tree took a quarter
        # of a cell's time (`x = 1`: about 280 against 210 us of CPU).
        try:
            code = compile(source, filename, "single", future_flags, True)
        except (SyntaxError, ValueError, OverflowError):
            pass  # the full path below reports it as it always has
        else:
            future_flags |= code.co_flags & FUTURE_MASK
            return [code]
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


def namespace_shape():
    """What the namespace holds, compared in C: its names, and the identity
    and type of each value (an object's class can be reassigned). None if
    it cannot be taken (a key that is not a string...)."""
    try:
        values = namespace.values()
        # One flat list (names, then ids, then types): equal lists have
        # equal parts, as their lengths are three times the namespace's.
        return [*namespace, *map(id, values), *map(type, values)]
    except Exception:
        return None


# The shape the last `done` was reported for and its variable list: the
# list is not built again while the shape is the same.
reported = (None, [])


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
        found.append([clip(name), clip(type_name(value))])
    return found


def clip(text, limit=200):
    """A name for the screen: very long ones are cut (and marked)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


# Crash-safe sessions: when the host records the session, it names a
# private file here, and after every command the variables the command
# touched (named in its code, rebound, or new) are pickled into it with the
# imports; the rest is kept from before. Nothing is written when nothing
# changed.
STATE_FILE = os.environ.pop("ENVHOST_STATE_FILE", "")
STATE_LIMIT = 1 << 20
STATE_TOTAL_LIMIT = 64 << 20
# "held": the value itself, for immutable ones (an int, a str, ...): while
# it is held its id cannot be reused, so the same object is the same value
# and is not pickled again when the code only names it (`x = 1` again).
kept = {"values": {}, "unsaved": {}, "ids": {}, "held": {}, "imports": [], "cwd": None, "shape": None}
IMMUTABLE = (int, float, complex, str, bytes, bool, type(None))


def lazy_modules():
    """pickle, base64 and re, imported once, when first needed."""
    global pickle, base64, WORDS
    import base64
    import pickle
    import re

    WORDS = re.compile(r"\w+", re.ASCII)


pickle = base64 = WORDS = None


def size_words(n):
    """A size in the host's words (envhost_core::text::bytes): 512 B, 92.7 KiB, 256 MiB."""
    if n < 1024:
        return "%d B" % n
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    if value == int(value) and value >= 10:
        return "%d %s" % (value, unit)
    return "%.1f %s" % (value, unit)


def keep_one(name, value):
    """The kept form of one variable: ("value", [type, data]) or
    ("unsaved", reason)."""
    if pickle is None:
        lazy_modules()
    kind = type_name(value)
    if isinstance(value, (types.FunctionType, type)) and getattr(value, "__module__", None) == "__main__":
        return "unsaved", "a %s defined in the session: its code is not saved; run its definition again" % (
            "class" if isinstance(value, type) else "function")
    size = getattr(value, "nbytes", None)
    if isinstance(size, int) and size > STATE_LIMIT:
        return "unsaved", "a %s of %s, over the %s bound" % (kind, size_words(size), size_words(STATE_LIMIT))
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:
        return "unsaved", "a %s that cannot be pickled (%s)" % (kind, clip(str(exc) or type(exc).__name__, 160))
    if len(data) > STATE_LIMIT:
        return "unsaved", "a %s of %s pickled, over the %s bound" % (kind, size_words(len(data)), size_words(STATE_LIMIT))
    if getattr(type(value), "__module__", None) == "__main__":
        return "unsaved", "a %s, a class defined in the session: it cannot be loaded before its class is defined again" % kind
    return "value", [kind, base64.b64encode(data).decode("ascii")]


def keep_state(source, cwd, shape):
    """Writes the state file if what is kept changed; says whether it did.

    The variables the command's code names are looked at again (their
    objects may have changed inside); the others only if rebound, added or
    removed. When the namespace holds the same names bound to the same
    objects as after the last command (two tuples compared in C, however
    many variables there are), only the named ones are looked at."""
    if not STATE_FILE:
        return False
    if pickle is None:
        lazy_modules()
    try:
        if shape is not None and shape == kept["shape"]:
            changed = False
            held, ids = kept["held"], kept["ids"]
            # Only a mutable value can change without changing the shape
            # (held ones are immutable; held names are a subset of ids).
            if len(held) < len(ids):
                words = WORDS.findall(source) if isinstance(source, str) else ()
                # The kept variables the code names (a set intersection, in C).
                for name in ids.keys() & words:
                    # A name bound to the very immutable value kept for it
                    # (`x = 1` again) is that value: nothing to look at.
                    value = namespace.get(name, MISSING)
                    if value is not MISSING and held.get(name, MISSING) is not value:
                        changed |= keep_name(name, value)
        else:
            words = WORDS.findall(source) if isinstance(source, str) else ()
            changed = keep_everything(set(words))
        kept["shape"] = shape
        if cwd != kept["cwd"]:
            kept["cwd"] = cwd
            changed = True
        if not changed:
            return False
        text = json.dumps(
            {"cwd": cwd, "variables": kept["values"], "unsaved": kept["unsaved"], "imports": kept["imports"]},
            sort_keys=True,
        )
        temporary = STATE_FILE + ".new"
        with open(temporary, "w") as file:
            file.write(text)
        os.replace(temporary, STATE_FILE)
        return True
    except BaseException:
        kept["shape"] = None
        return False


MISSING = object()


def keep_everything(mentioned):
    """Looks at every variable and import; says whether what is kept
    changed."""
    values, unsaved, ids, held = kept["values"], kept["unsaved"], kept["ids"], kept["held"]
    changed = False
    builtin_names = builtins.__dict__
    current = {}
    imports = []
    for name, value in list(namespace.items()):
        if not isinstance(name, str) or name.startswith("_"):
            continue
        if builtin_names.get(name, MISSING) is value:
            continue
        if isinstance(value, types.ModuleType):
            imports.append([value.__name__, name])
            continue
        current[name] = value
    for name in list(ids):
        if name not in current:
            ids.pop(name, None)
            held.pop(name, None)
            changed |= values.pop(name, None) is not None
            changed |= unsaved.pop(name, None) is not None
    for name, value in current.items():
        if name not in mentioned and ids.get(name) == id(value):
            continue
        changed |= keep_name(name, value)
    imports.sort()
    if imports != kept["imports"]:
        kept["imports"] = imports
        changed = True
    return changed


def keep_name(name, value):
    """Keeps the variable `name` (one of the agent's); says whether what is
    kept changed."""
    values, unsaved, held = kept["values"], kept["unsaved"], kept["held"]
    if held.get(name, MISSING) is value:
        return False
    kept["ids"][name] = id(value)
    if type(value) in IMMUTABLE:
        held[name] = value
    else:
        held.pop(name, None)
    where, form = keep_one(name, value)
    if where == "value":
        others = sum(len(kept_value[1]) for other, kept_value in values.items() if other != name)
        if others + len(form[1]) > STATE_TOTAL_LIMIT:
            where, form = "unsaved", "a %s: the saved variables would pass %s together" % (
                form[0], size_words(STATE_TOTAL_LIMIT))
    changed = False
    if where == "value":
        changed |= unsaved.pop(name, None) is not None
        if values.get(name) != form:
            values[name] = form
            changed = True
    else:
        changed |= values.pop(name, None) is not None
        if unsaved.get(name) != form:
            unsaved[name] = form
            changed = True
    return changed


def report_done(key, seq, status, refused, cwd, wrote_state, shape):
    global reported
    if shape is not None and shape == reported[0]:
        names = reported[1]
    else:
        try:
            names = variables()
        except Exception:
            names = []
        reported = (shape, names)
    message = {
        "type": "done",
        "seq": seq,
        "status": status,
        "cwd": cwd,
        "variables": names,
        "rejected": refused,
    }
    if wrote_state:
        message["kept"] = True
    if figures_saved:
        message["figures"] = list(figures_saved)
        del figures_saved[:]
    body = encode(message)
    if len(body) > PART_BYTES and names:
        # A namespace too big for one line goes ahead in parts of one line
        # each (an entry is at most two clipped names, well below a part).
        part, size = [], 0
        for entry in names:
            entry_bytes = len(encode(entry)) + 1
            if part and size + entry_bytes > PART_BYTES - 100:
                reply(key, {"type": "vars", "seq": seq, "variables": part})
                part, size = [], 0
            part.append(entry)
            size += entry_bytes
        message["variables"] = part
        body = encode(message)
    send(key, body)


def channel_lost(key, which, seq):
    """The code closed or replaced a descriptor the driver talks through.
    Say so where a person can see it, tell the host if the reply channel
    still works, then wait to be ended: the host cannot ask anything of an
    interpreter it cannot talk to, and exiting now would look like an
    ordinary exit."""
    try:
        sys.stderr.write(
            "envhost: the code closed or replaced the %s channel of envhost's "
            "python driver (file descriptor %d)\n"
            % (which, REQUEST_FD if which == "request" else REPLY_FD)
        )
        sys.stderr.flush()
    except Exception:
        pass
    if which == "request":
        try:
            reply(key, {"type": "lost", "seq": seq})
        except ChannelLost:
            pass
    while True:
        signal.pause()


def serve():
    global input_open
    try:
        key = bytes.fromhex(requests.readline().decode("ascii").strip())
    except Exception:
        key = b""
    if len(key) != 32:
        sys.stderr.write("envhost driver: no key on the request pipe\n")
        sys.exit(2)
    # Keyed BLAKE2b, one per direction (the personalization tells them
    # apart), copied for each message.
    key = (
        blake2b(key=key, digest_size=32, person=b"envhost-request"),
        blake2b(key=key, digest_size=32, person=b"envhost-reply"),
    )
    last_seq = 0
    cells = 0  # pieces of code run: <python-input-N> names the Nth
    try:
        reply(key, {"type": "ready", "seq": 0, "version": sys.version.split()[0], "pid": DRIVER_PID})
    except ChannelLost as lost:
        channel_lost(key, str(lost), 0)
    while True:
        try:
            request, refused = next_request(key, last_seq)
        except ChannelLost as lost:
            channel_lost(key, str(lost), last_seq)
        if request is None:
            return  # the host closed the pipe: it is done with us
        last_seq = request["seq"]
        try:
            if request.get("op") == "sync":
                reply(key, {"type": "synced", "seq": last_seq, "rejected": refused})
                continue
            source = request.get("code")
            cells += 1
            if request.get("stdin"):
                take_stdin_pipe(last_seq)
            input_open = bool(request.get("input")) and stdin_pipe is not None
            if input_open != stdin_on_pipe:
                use_stdin(input_open)
            try:
                status = run(source, cells) if isinstance(source, str) else "error"
            finally:
                input_open = False
            if os.getpid() != DRIVER_PID:
                # A fork made by the agent's code that fell through to here:
                # it must neither answer the host nor read its requests.
                flush_user_streams()
                os._exit(0)
            if "matplotlib.pyplot" in sys.modules:
                save_figures_left_open()
            flush_user_streams()
            cwd = working_directory()
            shape = namespace_shape()
            wrote_state = keep_state(source, cwd, shape)
            report_done(key, last_seq, status, refused, cwd, wrote_state, shape)
        except ChannelLost as lost:
            channel_lost(key, str(lost), last_seq)


serve()
