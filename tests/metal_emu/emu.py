"""Runs Metal kernels on the CPU: the Python side of the Metal emulator.

    prog = emu.load("mlx_fused_attn/families/FOLDER/FAMILY.metal")
    out = prog.launch("host_name", buffers={0: q, 1: k, 3: o},
                      constants={300: False}, grid=(4, 2, 1),
                      threadgroup=(128, 1, 1), schedule="fair")
    out[3]  # o after the kernel ran, same dtype and shape as given

load() compiles the .metal file, unmodified, with the shim in include/
(plus a generated trampoline and the runtime in runtime/) into a driver
executable under .build/, cached by a hash of every input. launch() writes a
request file, runs the driver as a subprocess (so the sanitizers run in a
process of their own), and reads the buffers back. Any failure -- a
sanitizer report, a deadlock, a binding mismatch, a crash -- raises
EmulatorError carrying the driver's report. See README.md.
"""

import contextlib
import functools
import hashlib
import os
import platform
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass

import numpy as np

from . import gen_trampoline, metal_source

EMU_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(EMU_DIR))
SHIM_DIR = os.path.join(EMU_DIR, "include")
RUNTIME_DIR = os.path.join(EMU_DIR, "runtime")
BUILD_DIR = os.environ.get("FA_EMU_BUILD_DIR", os.path.join(EMU_DIR, ".build"))
CXX = os.environ.get("FA_EMU_CXX", "g++")

# Stack-clash protection probes every page of a large frame, so a thread
# overflowing its fiber stack hits the guard page instead of a neighbour.
# Line tables only (-g1): the sanitizers' reports keep their source lines,
# and a driver compiles in 60% of the time full debug information takes.
BASE_FLAGS = ["-std=c++17", "-O1", "-g1", "-fno-omit-frame-pointer", "-fstack-clash-protection"]
QUIET = ["-Wno-attributes", "-Wno-unknown-pragmas"]


@dataclass(frozen=True)
class Mode:
    """How a driver is built: `kernel` flags for the kernel translation unit,
    `runtime` for the runtime (left uninstrumented by ThreadSanitizer: its
    bookkeeping is shared by all fibers by design), `link` for the driver."""

    name: str
    kernel: tuple
    runtime: tuple
    link: tuple


# Out-of-bounds accesses and undefined behaviour; the default.
CHECKED = Mode(
    "checked",
    ("-fsanitize=address,undefined", "-fno-sanitize-recover=all"),
    ("-fsanitize=address,undefined", "-fno-sanitize-recover=all"),
    ("-fsanitize=address,undefined",),
)
# Data races between threads that no barrier or simdgroup operation orders.
RACE = Mode(
    "race",
    ("-fsanitize=thread,undefined", "-fno-sanitize-recover=undefined"),
    ("-DFA_EMU_TSAN=1", "-fsanitize=undefined", "-fno-sanitize-recover=undefined"),
    ("-fsanitize=thread,undefined",),
)
# Memory traffic and operation counts: the kernel instrumented by
# ThreadSanitizer's compiler pass, whose access hooks runtime/load_count.cpp
# defines (no ThreadSanitizer runtime is linked, so nothing else of it runs),
# and the runtime counting rendezvous (runtime/op_count.cpp). The other
# builds compile neither.
COUNTS = Mode("counts", ("-fsanitize=thread",), ("-DFA_EMU_COUNT=1",), ())
# How the kernel sources see the emulator: a Metal compiler of Metal 3.1
# with bfloat, and threadgroup arrays as statics (one threadgroup runs at a
# time in a driver process, so a static is exactly threadgroup-shared).
METAL_DEFINES = [
    "-D__METAL_VERSION__=310",
    "-D__HAVE_BFLOAT__=1",
    "-DFA_SHARED_ARRAY_DECL=static",
]
# On the host every pointer is a plain pointer.
NO_ADDRESS_SPACES = {q: " " * len(q) for q in metal_source.ADDRESS_SPACES}
RUNTIME_SOURCES = [
    "fiber.cpp", "scheduler.cpp", "launch.cpp", "request.cpp", "load_count.cpp", "op_count.cpp",
    "driver_main.cpp",
]
RUN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:detect_stack_use_after_return=0:"
    "halt_on_error=1:abort_on_error=0:symbolize=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "TSAN_OPTIONS": "halt_on_error=1:history_size=7:report_signal_unsafe=0",
}


# The fibers' context switch is x86-64 assembly and the build reads ELF
# symbols; elsewhere (a Mac runs the kernels on its GPU instead) the
# emulator's tests skip.
UNSUPPORTED = (
    None
    if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")
    else f"the Metal emulator runs on x86-64 Linux, not {platform.system()} {platform.machine()}"
)


class EmulatorError(AssertionError):
    """A kernel failed under the emulator; the message is the driver's report."""


class CompileError(EmulatorError):
    """A .metal file (or the trampoline for it) did not compile."""


# ---------------------------------------------------------------------------
# bfloat16 helpers: numpy has no bfloat16, so kernels see uint16 bit patterns.


def float_to_bfloat16_bits(a):
    """float32 values -> bfloat16 bits (uint16), round to nearest even."""
    x = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    nan = (x & 0x7FFFFFFF) > 0x7F800000
    rounded = (x + 0x7FFF + ((x >> 16) & 1)) >> 16
    return np.where(nan, (x >> 16) | 0x40, rounded).astype(np.uint16)


def bfloat16_bits_to_float(b):
    """bfloat16 bits (uint16) -> float32 values."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------------------
# Building


def _run(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"{what} failed:\n{' '.join(cmd)}\n{proc.stderr[-20000:]}")
    return proc.stdout


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def _source_files(path, include_dirs):
    """path and every file it includes with quotes, transitively."""
    seen, todo = [], [os.path.abspath(path)]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.append(f)
        with open(f) as fh:
            text = fh.read()
        for inc in _INCLUDE.findall(text):
            for d in [os.path.dirname(f)] + include_dirs:
                cand = os.path.join(d, inc)
                if os.path.exists(cand):
                    todo.append(os.path.abspath(cand))
                    break
    return seen


def _tree_files(d):
    out = []
    for root, _, files in os.walk(d):
        out += [os.path.join(root, f) for f in files]
    return sorted(out)


def _digest(files, extra):
    h = hashlib.sha256()
    for part in extra:
        h.update(part.encode() + b"\0")
    for f in files:
        h.update(f.encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _compiler_id():
    return subprocess.run([CXX, "--version"], capture_output=True, text=True).stdout


@contextlib.contextmanager
def _build_lock(final):
    """Held while `final` is built, so that a second test process waits for
    the build rather than compiling the same driver beside it (CI has two
    cores for two processes)."""
    import fcntl  # POSIX: the emulator runs on Linux and macOS only

    os.makedirs(BUILD_DIR, exist_ok=True)
    with open(final + ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _publish(tmp, final):
    """Moves a finished build directory into place; a concurrent builder
    may have won the race, which is fine."""
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def _runtime_objects(mode):
    inputs = _tree_files(RUNTIME_DIR) + _tree_files(SHIM_DIR)
    flags = BASE_FLAGS + list(mode.runtime)
    key = _digest(inputs, flags + [CXX, _compiler_id()])
    final = os.path.join(BUILD_DIR, f"runtime-{mode.name}-{key}")
    with _build_lock(final):
        if not os.path.isdir(final):
            tmp = tempfile.mkdtemp(dir=BUILD_DIR, prefix="tmp-runtime-")
            procs = []
            for src in RUNTIME_SOURCES:
                obj = os.path.join(tmp, src.replace(".cpp", ".o"))
                cmd = [CXX, *flags, "-c", os.path.join(RUNTIME_DIR, src), "-o", obj]
                procs.append((cmd, subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)))
            for cmd, p in procs:
                _, err = p.communicate()
                if p.returncode != 0:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise CompileError(f"building the emulator runtime failed:\n{' '.join(cmd)}\n{err}")
            _publish(tmp, final)
    return [os.path.join(final, s.replace(".cpp", ".o")) for s in RUNTIME_SOURCES]


def _kernel_flags(metal_path, include_dirs=(), defines=()):
    return [
        *METAL_DEFINES,
        *(f"-D{d}" for d in defines),
        "-I", SHIM_DIR,
        "-I", RUNTIME_DIR,
        "-I", REPO_ROOT,
        "-I", os.path.dirname(os.path.abspath(metal_path)),
        *(flag for d in include_dirs for flag in ("-I", d)),
    ]


def _shared_arrays(driver, names):
    """(offset from the runtime's anchor, size) of each FA_SHARED_ARRAY_DECL
    array in the driver, from its symbol table."""
    out = _run(["nm", "-C", "-S", "--defined-only", driver], "nm")
    anchor, arrays = None, []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) != 4:
            continue
        addr, size, kind, name = parts
        if name == "fa_emu::anchor":
            anchor = int(addr, 16)
        m = re.search(r"\)::(\w+)$", name)
        # A template's function-local static is a unique global ("u").
        if m and m.group(1) in names and kind in "bBdDu" and not name.startswith("guard"):
            arrays.append((int(addr, 16), int(size, 16)))
    return [(a - anchor, s) for a, s in arrays]


# An explicit kernel instantiation as the preprocessor leaves it: one
# statement, its host name possibly split into adjacent string literals.
_INSTANCE = re.compile(r'template\s*\[\[\s*host_name\s*\(((?:\s*"[^"]*")+)\s*\)\s*\]\][^;]*;')


def _host_name(m):
    """The host name of an _INSTANCE match, its adjacent literals joined."""
    return "".join(re.findall(r'"([^"]*)"', m.group(1)))


def _keep_instance(pre, host_name):
    """The preprocessed unit without the explicit kernel instantiations of
    other host names: a driver for one kernel compiles that one alone."""
    return _INSTANCE.sub(lambda m: m.group(0) if _host_name(m) == host_name else "", pre)


def _preprocess(metal_path, flags, out_dir, unnamed_namespace=True):
    """(the .metal file's unit after the preprocessor, the wrapper's path)."""
    wrapper = os.path.join(out_dir, "wrapper.cpp")
    with open(wrapper, "w") as fh:
        fh.write(gen_trampoline.wrapper(metal_path, unnamed_namespace))
    pre = _run([CXX, "-std=c++17", "-E", *flags, wrapper], f"preprocessing {metal_path}")
    return pre, wrapper


def _compile_driver(metal_path, mode, flags, runtime, shared_names, out_dir, only, unnamed_namespace):
    pre, wrapper = _preprocess(metal_path, flags, out_dir, unnamed_namespace)
    if only is not None:
        pre = _keep_instance(pre, only)
    internal = [SHIM_DIR + os.sep, RUNTIME_DIR + os.sep, wrapper]
    try:
        prog = gen_trampoline.parse(pre, internal)
        tables = gen_trampoline.generate(prog)
    except gen_trampoline.ParseError as e:
        raise CompileError(f"{metal_path}: {e}") from None
    with open(os.path.join(out_dir, "kernels.ii"), "w") as fh:
        unit = metal_source.static_threadgroup_variables(pre, internal)
        unit = metal_source.this_address_space_overloads(unit, internal)
        unit = metal_source.member_specializations_as_overloads(unit, internal)
        unit = metal_source.rewrite_address_spaces(unit, internal, NO_ADDRESS_SPACES)
        fh.write(metal_source.drop_repeated_declarations(unit, internal))
        fh.write(tables)
    obj = os.path.join(out_dir, "kernels.o")
    _run([CXX, *BASE_FLAGS, *mode.kernel, *QUIET, "-c", os.path.join(out_dir, "kernels.ii"), "-o", obj],
         f"compiling {metal_path}")
    driver = os.path.join(out_dir, "driver")
    _run([CXX, *mode.link, obj, *runtime, "-o", driver], f"linking {metal_path}")
    with open(os.path.join(out_dir, "shared_arrays"), "w") as fh:
        for off, size in _shared_arrays(driver, set(shared_names)):
            fh.write(f"{off} {size}\n")


def _build(metal_path, mode, only=None, include_dirs=(), defines=(), unnamed_namespace=True):
    """(driver, shared arrays) of metal_path in `mode`: every kernel, or
    the one with host name `only` (and the file's non-template kernels)."""
    metal_path = os.path.abspath(metal_path)
    flags = _kernel_flags(metal_path, include_dirs, defines)
    sources = _source_files(metal_path, [REPO_ROOT, *include_dirs])
    shared_names = []
    for f in sources:
        with open(f) as fh:
            shared_names += metal_source.scan_source(fh.read())
    runtime = _runtime_objects(mode)
    key = _digest(
        sources
        + _tree_files(SHIM_DIR)
        + _tree_files(RUNTIME_DIR)
        + [gen_trampoline.__file__, metal_source.__file__],
        BASE_FLAGS + list(mode.kernel) + list(mode.link) + flags
        + [CXX, _compiler_id(), only or "", str(unnamed_namespace)],
    )
    stem = os.path.splitext(os.path.basename(metal_path))[0]
    final = os.path.join(BUILD_DIR, f"{stem}-{mode.name}-{key}")
    with _build_lock(final):
        if not os.path.isdir(final):
            tmp = tempfile.mkdtemp(dir=BUILD_DIR, prefix=f"tmp-{stem}-")
            try:
                _compile_driver(metal_path, mode, flags, runtime, shared_names, tmp, only,
                                unnamed_namespace)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            _publish(tmp, final)
    with open(os.path.join(final, "shared_arrays")) as fh:
        shared = [tuple(int(v) for v in line.split()) for line in fh]
    return os.path.join(final, "driver"), shared


# ---------------------------------------------------------------------------
# Launching


@dataclass(frozen=True)
class Loads:
    """One buffer's traffic in a launch (Program.count_loads).

    read: bytes read by all threads together; distinct: bytes read counted
    once per threadgroup, summed over threadgroups (the traffic of a kernel
    whose threadgroup reads each byte it needs once); written: bytes written.
    """

    read: int
    distinct: int
    written: int


# Site names (the shim's FA_EMU_HERE) by what the operation is.
MATRIX_MULTIPLIES = ("simdgroup_multiply_accumulate", "simdgroup_multiply")
MATRIX_LOADS = ("simdgroup_load",)
MATRIX_STORES = ("simdgroup_store",)
BARRIERS = ("threadgroup_barrier",)
SIMDGROUP_BARRIERS = ("simdgroup_barrier",)
SHUFFLES = (
    "simd_shuffle", "simd_shuffle_xor", "simd_shuffle_down", "simd_shuffle_up",
    "simd_shuffle_rotate_down", "simd_shuffle_rotate_up", "simd_broadcast", "simd_broadcast_first",
)
REDUCTIONS = (
    "simd_sum", "simd_product", "simd_max", "simd_min", "simd_and", "simd_or", "simd_xor",
    "simd_prefix_inclusive_sum", "simd_prefix_exclusive_sum", "simd_prefix_inclusive_product",
    "simd_prefix_exclusive_product", "simd_all", "simd_any", "simd_is_first",
)


@dataclass(frozen=True)
class Ops:
    """What one launch did (Program.count_ops), summed over its threadgroups.

    by_name: {operation: count} for every simdgroup function, simdgroup
    matrix operation and barrier that occurred, each counted once per
    simdgroup that performed it (a barrier once per threadgroup), not per
    lane. threadgroup_read / threadgroup_written: bytes of threadgroup
    memory all threads read and wrote (simdgroup_load and simdgroup_store
    included). loads: {buffer index: Loads}, the device traffic as
    count_loads gives it. Counts are of the code g++ compiles at -O1 from
    the kernel source: a value the compiler keeps in a register is not
    read again.
    """

    by_name: dict
    threadgroup_read: int
    threadgroup_written: int
    loads: dict

    def _sum(self, names):
        return sum(self.by_name.get(n, 0) for n in names)

    @property
    def matrix_multiplies(self):
        return self._sum(MATRIX_MULTIPLIES)

    @property
    def matrix_loads(self):
        return self._sum(MATRIX_LOADS)

    @property
    def matrix_stores(self):
        return self._sum(MATRIX_STORES)

    @property
    def barriers(self):
        return self._sum(BARRIERS)

    @property
    def simdgroup_barriers(self):
        return self._sum(SIMDGROUP_BARRIERS)

    @property
    def shuffles(self):
        return self._sum(SHUFFLES)

    @property
    def reductions(self):
        return self._sum(REDUCTIONS)


@dataclass
class Param:
    kind: str  # "buffer", "threadgroup" or "builtin"
    index: int
    name: str
    type: str
    element_size: int


def _as_bytes(value):
    """(raw bytes, a function turning result bytes back into value's kind)."""
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        return arr.tobytes(), lambda b: np.frombuffer(b, dtype=arr.dtype).reshape(arr.shape).copy()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), bytes
    if hasattr(value, "_fields_"):  # a ctypes.Structure
        return bytes(value), bytes
    raise TypeError(f"cannot bind a {type(value).__name__} as a buffer")


def _constant(index, value):
    if isinstance(value, (bool, np.bool_)):
        return struct.pack("<IIqd", index, 0, int(value), 0.0)
    if isinstance(value, (int, np.integer)):
        return struct.pack("<IIqd", index, 1, int(value), 0.0)
    if isinstance(value, (float, np.floating)):
        return struct.pack("<IIqd", index, 2, 0, float(value))
    raise TypeError(f"function constant {index}: cannot pass a {type(value).__name__}")


def _dims(name, v):
    v = tuple(int(x) for x in v) + (1,) * (3 - len(v))
    if len(v) != 3 or min(v) < 1:
        raise ValueError(f"{name} must have 1 to 3 positive sizes, got {v}")
    return v


class Program:
    """The kernels of one .metal file, ready to launch."""

    def __init__(self, metal_path, only=None, include_dirs=(), defines=(), unnamed_namespace=True):
        self.path = metal_path
        self._options = (tuple(include_dirs), tuple(defines), unnamed_namespace)
        self._drivers = {(CHECKED, None): _build(metal_path, CHECKED, only, *self._options)}
        self.kernels = {}
        self.constants = {}
        listing = subprocess.run(
            [self._drivers[(CHECKED, None)][0], "--list"],
            capture_output=True,
            text=True,
            env={**os.environ, **RUN_ENV},
        )
        if listing.returncode != 0:
            raise EmulatorError(f"{self.path}: listing the kernels failed:\n{listing.stderr}")
        current = None
        for line in listing.stdout.splitlines():
            f = line.split("\t")
            if f[0] == "kernel":
                current = self.kernels.setdefault(f[1], [])
            elif f[0] == "param":
                current.append(Param(f[1], int(f[2]), f[3], f[4], int(f[5])))
            elif f[0] == "constant":
                self.constants[int(f[1])] = (f[2], f[3])

    def launch(
        self,
        name,
        buffers,
        constants=None,
        grid=(1, 1, 1),
        threadgroup=(32, 1, 1),
        threadgroup_memory=None,
        schedule="fair",
        race_check=False,
        stack_kb=256,
        timeout=600,
    ):
        """Runs kernel `name` over `grid` threadgroups of `threadgroup` threads.

        buffers: {index: numpy array | bytes | ctypes.Structure}, bound at
            [[buffer(index)]]; each becomes its own exact-size allocation.
        constants: {function constant index: bool | int | float}.
        threadgroup_memory: {index: bytes} for [[threadgroup(index)]] params.
        schedule: "fair" (round robin) or an int seed (adversarial).
        race_check: run the ThreadSanitizer build instead of the address
            sanitizer one, reporting accesses that no barrier orders.
        Returns {index: buffer after the run}, arrays with the given dtype and
        shape (bytes for bytes and structures).
        """
        return self._run(RACE if race_check else CHECKED, name, buffers, constants, grid,
                         threadgroup, threadgroup_memory, schedule, stack_kb, timeout)[0]

    def count_loads(self, name, buffers, constants=None, grid=(1, 1, 1), threadgroup=(32, 1, 1),
                    threadgroup_memory=None, schedule="fair", stack_kb=256, timeout=600):
        """Runs kernel `name` like launch() in a build that counts the
        device-memory traffic. Returns (buffers after the run, {index: Loads}).
        """
        out, counts = self._run(COUNTS, name, buffers, constants, grid, threadgroup,
                                threadgroup_memory, schedule, stack_kb, timeout)
        return out, counts.loads

    def count_ops(self, name, buffers, constants=None, grid=(1, 1, 1), threadgroup=(32, 1, 1),
                  threadgroup_memory=None, schedule="fair", stack_kb=256, timeout=600):
        """Runs kernel `name` like launch() in the counting build (the one
        count_loads runs). Returns (buffers after the run, Ops).
        """
        return self._run(COUNTS, name, buffers, constants, grid, threadgroup,
                         threadgroup_memory, schedule, stack_kb, timeout)

    def _run(self, mode, name, buffers, constants, grid, threadgroup, threadgroup_memory,
             schedule, stack_kb, timeout):
        grid, threadgroup = _dims("grid", grid), _dims("threadgroup", threadgroup)
        if schedule == "fair":
            adversarial, seed = 0, 0
        elif isinstance(schedule, (int, np.integer)) and not isinstance(schedule, bool):
            adversarial, seed = 1, int(schedule) & (2**64 - 1)
        else:
            raise ValueError(f"schedule must be 'fair' or an int seed, got {schedule!r}")
        kname = name.encode()
        req = [b"FAEMU01\n", struct.pack("<I", len(kname)), kname]
        req.append(struct.pack("<6I", *grid, *threadgroup))
        req.append(struct.pack("<IQQ", adversarial, seed, stack_kb * 1024))
        constants = constants or {}
        req.append(struct.pack("<I", len(constants)))
        req += [_constant(int(i), v) for i, v in sorted(constants.items())]
        order, back = [], []
        req.append(struct.pack("<I", len(buffers)))
        for i, v in sorted(buffers.items()):
            raw, convert = _as_bytes(v)
            req += [struct.pack("<IQ", int(i), len(raw)), raw]
            order.append((int(i), len(raw)))
            back.append(convert)
        tgm = threadgroup_memory or {}
        req.append(struct.pack("<I", len(tgm)))
        req += [struct.pack("<IQ", int(i), int(n)) for i, n in sorted(tgm.items())]
        # The instrumented builds are slow to compile: theirs hold the
        # launched kernel alone.
        build = (mode, None if mode is CHECKED else name)
        if build not in self._drivers:
            self._drivers[build] = _build(self.path, *build, *self._options)
        driver, shared = self._drivers[build]
        req.append(struct.pack("<I", len(shared)))
        req += [struct.pack("<qQ", off, size) for off, size in shared]

        with tempfile.TemporaryDirectory(prefix="fa_emu_") as tmp:
            rq, rs = os.path.join(tmp, "request"), os.path.join(tmp, "result")
            with open(rq, "wb") as fh:
                fh.write(b"".join(req))
            try:
                proc = subprocess.run(
                    [driver, rq, rs],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    env={**os.environ, **RUN_ENV},
                )
            except subprocess.TimeoutExpired:
                raise EmulatorError(
                    f"kernel '{name}' from {self.path} ran for more than {timeout} s"
                ) from None
            if proc.returncode != 0:
                hint = (
                    f"\n(each thread has a {stack_kb} KiB stack; launch(stack_kb=...) raises it)"
                    if "stack-overflow" in proc.stderr
                    else ""
                )
                raise EmulatorError(
                    f"kernel '{name}' from {self.path} failed "
                    f"(exit status {proc.returncode}):\n{proc.stderr[-20000:]}{hint}"
                )
            with open(rs, "rb") as fh:
                data = fh.read()
            counts = _read_counts(rs) if mode is COUNTS else None
        out, pos = {}, 0
        for (i, n), convert in zip(order, back):
            out[i] = convert(data[pos : pos + n])
            pos += n
        return out, counts


def _read_counts(result_path):
    """The counting build's files beside the result (runtime/load_count.h,
    runtime/op_count.h) as Ops."""
    loads, tg = {}, (0, 0)
    with open(result_path + ".loads") as fh:
        for line in fh:
            kind, *values = line.split()
            if kind == "buffer":
                i, read, distinct, written = (int(v) for v in values)
                loads[i] = Loads(read, distinct, written)
            else:
                tg = tuple(int(v) for v in values)
    by_name = {}
    with open(result_path + ".ops") as fh:
        for line in fh:
            op, count = line.split()
            by_name[op] = int(count)
    return Ops(by_name, tg[0], tg[1], loads)


_programs = {}


def _repo_path(metal_path):
    path = metal_path if os.path.isabs(metal_path) else os.path.join(REPO_ROOT, metal_path)
    return os.path.abspath(path)


def load(metal_path, only=None, include_dirs=(), defines=(), unnamed_namespace=True):
    """Builds (or finds in the cache) the driver for a .metal file: every
    kernel, or the explicit instantiation with host name `only` (and the
    file's non-template kernels), which compiles in a fraction of the time.

    include_dirs: further directories the kernel source includes from
    (MLX's kernel headers, for mlx_kernels/). defines: NAME or NAME=VALUE
    macros for the kernel unit, the shim included (the planted emulator
    faults of include/metal_emu/plant.h). unnamed_namespace=False compiles
    the source at program scope, as Metal does, rather than inside an
    unnamed namespace: for sources whose name lookup depends on it (MLX's
    headers overload Metal's functions at program scope beside `using
    namespace metal;`); the address sanitizer then puts no redzones around
    the threadgroup arrays of template kernels (README.md).

    A relative path is taken from the repository root. Where the emulator
    cannot run, skips the calling test.
    """
    if UNSUPPORTED:
        import pytest

        pytest.skip(UNSUPPORTED)
    key = (_repo_path(metal_path), only, tuple(include_dirs), tuple(defines), unnamed_namespace)
    if key not in _programs:
        _programs[key] = Program(*key)
    return _programs[key]


def instance_names(metal_path):
    """The host names of a .metal file's explicit kernel instantiations, from
    its preprocessed text (nothing is compiled)."""
    path = _repo_path(metal_path)
    with tempfile.TemporaryDirectory(prefix="fa_emu_names_") as tmp:
        pre, _ = _preprocess(path, _kernel_flags(path), tmp)
    return {_host_name(m) for m in _INSTANCE.finditer(pre)}
