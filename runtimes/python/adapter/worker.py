# at-run worker protocol v1 -- the Python language adapter.
#
# Launched by the runner as
#   /opt/at-run/runtime/bin/python3 -I -B /opt/at-run/runtime/adapter/worker.py <entrypoint>
# 1. reads ONE newline-terminated JSON envelope from stdin:
#      {version:1, id, type:'invoke', code:{uri,cid}, handler, input, context:{callerDid, deadline, secrets?}}
# 2. loads the code entrypoint as a module and calls its `handler(input, context)` (plain or async def);
#    context.secrets is the job's opened secrets by name, a read-only mapping, empty when the execution has none;
#    the adapter never prints or echoes them (they arrive on stdin only, never in argv or env);
# 3. writes NDJSON frames to stdout: optional {type:'log'|'progress', id, ...}, then exactly one terminal
#    {type:'result', id, output} or {type:'error', id, error:{code, message}}; then exits.
# stdout belongs to the protocol: file descriptor 1 is re-pointed at stderr before user code runs, so print(),
# sys.stdout, C extensions and child processes all write to stderr; frames go to a private duplicate.
import errno
import importlib.util
import inspect
import json
import os
import re
import sys
import types

PROTOCOL_VERSION = 1
MAX_ENVELOPE_BYTES = 8 * 1024 * 1024
HANDLER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# --- stdout is the protocol channel; everything else goes to stderr ---------------------------------------
_protocol_fd = os.dup(1)
os.set_inheritable(_protocol_fd, False)
os.dup2(2, 1)
sys.stdout = sys.stderr

_state = {"id": None, "terminal": False}


def _write_all(data):
    view = memoryview(data)
    while view:
        n = os.write(_protocol_fd, view)
        view = view[n:]


def _frame(obj):
    _write_all((json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8"))


def _finish(obj, exit_code):
    if _state["terminal"]:
        return
    _state["terminal"] = True
    _frame(obj)
    try:
        sys.stderr.flush()
    finally:
        os._exit(exit_code)


def _fail(code, message):
    _finish({"type": "error", "id": _state["id"], "error": {"code": code, "message": str(message)[:65536]}}, 1)


def _error_code(err):
    code = getattr(err, "code", None)
    if isinstance(code, str) and 0 < len(code) <= 128:
        return code
    if isinstance(err, OSError) and err.errno in errno.errorcode:
        return errno.errorcode[err.errno]  # e.g. EROFS, ECONNREFUSED, ENETUNREACH
    return "HANDLER_ERROR"


def _error_message(err):
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _read_envelope_line():
    data = sys.stdin.buffer.readline(MAX_ENVELOPE_BYTES + 1)
    if len(data) > MAX_ENVELOPE_BYTES:
        raise ValueError(f"envelope exceeds {MAX_ENVELOPE_BYTES} bytes")
    return data.decode("utf-8")


def _check_envelope(env):
    if not isinstance(env, dict):
        return ["envelope is not a JSON object"]
    problems = []
    if env.get("version") != PROTOCOL_VERSION:
        problems.append(f"unsupported protocol version {env.get('version')!r}")
    if env.get("type") != "invoke":
        problems.append(f"unsupported envelope type {env.get('type')!r}")
    if not isinstance(env.get("id"), str) or not env["id"]:
        problems.append("id must be a non-empty string")
    if not isinstance(env.get("handler"), str) or not HANDLER_NAME.match(env["handler"]):
        problems.append("handler must be an identifier")
    code = env.get("code")
    if not isinstance(code, dict) or not isinstance(code.get("uri"), str) or not isinstance(code.get("cid"), str):
        problems.append("code must be {uri, cid}")
    if not isinstance(env.get("context"), dict):
        problems.append("context must be an object")
    elif "secrets" in env["context"] and not _is_secrets(env["context"]["secrets"]):
        problems.append("context.secrets must be an object of strings")  # never the values: only their shape
    return problems


def _is_secrets(s):
    return isinstance(s, dict) and all(isinstance(v, str) for v in s.values())


class Context:
    """What a handler receives as its second argument. Attribute and mapping access both work."""

    def __init__(self, env):
        ctx = env["context"]
        self.id = env["id"]
        self.invocation_id = env["id"]
        self.caller_did = ctx.get("callerDid")
        self.callerDid = self.caller_did
        self.deadline = ctx.get("deadline")
        self.secrets = types.MappingProxyType(dict(ctx.get("secrets") or {}))
        self.code = {"uri": env["code"]["uri"], "cid": env["code"]["cid"]}

    def __getitem__(self, key):
        return getattr(self, key)

    def get(self, key, default=None):
        return getattr(self, key, default)

    def log(self, *args):
        if not _state["terminal"]:
            _frame({"type": "log", "id": self.id, "level": "info", "message": " ".join(str(a) for a in args)})

    def progress(self, value, message=None):
        if not _state["terminal"]:
            frame = {"type": "progress", "id": self.id, "progress": value}
            if message is not None:
                frame["message"] = str(message)
            _frame(frame)


def main():
    if len(sys.argv) != 2 or not os.path.isabs(sys.argv[1]):
        return _fail("BAD_LAUNCH", "the adapter needs the absolute entrypoint path as its only argument")
    entrypoint = sys.argv[1]
    try:
        line = _read_envelope_line()
        env = json.loads(line)
    except Exception as err:  # noqa: BLE001 -- any malformed input is reported, not raised
        return _fail("BAD_ENVELOPE", f"envelope is not valid JSON: {_error_message(err)}")
    if isinstance(env, dict) and isinstance(env.get("id"), str):
        _state["id"] = env["id"]
    problems = _check_envelope(env)
    if problems:
        return _fail("BAD_ENVELOPE", "; ".join(problems))
    try:
        sys.stdin.close()
    except OSError:
        pass

    # Multi-file artifacts import their siblings: the entrypoint's directory goes first on sys.path.
    sys.path.insert(0, os.path.dirname(entrypoint))
    try:
        spec = importlib.util.spec_from_file_location("__at_run_main__", entrypoint)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {entrypoint}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["__at_run_main__"] = module
        spec.loader.exec_module(module)
    except BaseException as err:  # noqa: BLE001 -- including SystemExit from module top level
        return _fail("ENTRYPOINT_LOAD_FAILED", f"could not load the code entrypoint: {_error_message(err)}")

    fn = module.__dict__.get(env["handler"])
    if not callable(fn):
        return _fail("HANDLER_NOT_FOUND", f"the entrypoint defines no function named {env['handler']}")

    context = Context(env)
    try:
        output = fn(env.get("input"), context)
        if inspect.isawaitable(output):
            import asyncio

            async def _await(aw):
                return await aw

            output = asyncio.run(_await(output))
    except BaseException as err:  # noqa: BLE001 -- SystemExit/KeyboardInterrupt from user code too
        return _fail(_error_code(err), _error_message(err))

    try:
        serialized = json.dumps(
            {"type": "result", "id": env["id"], "output": output}, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    except (TypeError, ValueError) as err:
        return _fail("OUTPUT_NOT_SERIALIZABLE", _error_message(err))
    if _state["terminal"]:
        return None
    _state["terminal"] = True
    _write_all((serialized + "\n").encode("utf-8"))
    try:
        sys.stderr.flush()
    finally:
        os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except BaseException as err:  # noqa: BLE001
        _fail("ADAPTER_ERROR", _error_message(err))
