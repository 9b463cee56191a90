"""One worker: a private copy of the repository in which mutants are applied,
tested and undone, one at a time. The working tree is never touched.

The copy lives at a fixed path under the work directory, so that the
emulator's driver cache (keyed by the sources' paths and contents, under the
copy's own FA_EMU_BUILD_DIR) serves every unmutated .metal file from the
first build on, across mutants and across runs.
"""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import scope

# How the emulator preprocesses a .metal file (tests/metal_emu/emu.py).
METAL_DEFINES = ["-D__METAL_VERSION__=310", "-D__HAVE_BFLOAT__=1", "-DFA_SHARED_ARRAY_DECL=static"]
CXX = os.environ.get("FA_EMU_CXX", "g++")

# The first, fast pass leaves out what costs a second driver build per
# .metal file (ThreadSanitizer runs; the JIT text flattened from every
# source); a mutant that survives it meets every test that can see it.
QUICK_DESELECT = "not race and not races and not flattened and not late_copies"
# clang's syntax pass sees nothing there that g++ building the drivers does
# not; it runs in the second pass only, and so does the conformance pass,
# which kills what the emulator cannot see (a duplicated argument index) but
# would add its clang run to every mutant the emulator kills.
FULL_ONLY = {"test_strict_check.py", "test_metal_conformance.py"}
# Cheapest first, so that -x stops a killed mutant early: host programs,
# then drivers by build time (neighborhood is the slowest).
FILE_COST = {
    "test_coverage_rules.py": 0,
    "test_metal_conformance.py": 0,
    "test_attn_params.py": 0,
    "test_smem_layout.py": 0,
    "test_attention_kernel.py": 2,
    "test_short_attention_kernel.py": 3,
    "test_tile_ops.py": 4,
    "test_na_kernel.py": 6,
}


def _files(root):
    """Tracked and untracked, not ignored, files of the working tree."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout
    return [f for f in out.decode().split("\0") if f and (root / f).is_file()]


class Worker:
    def __init__(self, work_dir, index, seen_by):
        self.repo = pathlib.Path(work_dir) / f"worker{index}" / "repo"
        self.build = pathlib.Path(work_dir) / f"worker{index}" / "build"
        self.seen_by = seen_by
        self._baseline = {}

    def sync(self):
        """Makes the copy match the working tree (files rewritten only where
        they differ, so cached builds stay valid)."""
        for f in _files(scope.REPO):
            src, dst = scope.REPO / f, self.repo / f
            data = src.read_bytes()
            if not dst.is_file() or dst.read_bytes() != data:
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(data)
                shutil.copymode(src, dst)

    # -- the preprocessor's view -------------------------------------------

    def _views(self, source):
        """Token lists of what the compilers see of `source`: each .metal
        translation unit holding it, as the emulator preprocesses it, and the
        header alone as the Mac's host code includes it."""
        views = []
        for metal in scope.metal_views(source, self.repo):
            path = self.repo / metal
            views.append(self._preprocess([*METAL_DEFINES, "-I", str(self.repo / scope.EMU_TESTS / "include"),
                                           "-I", str(self.repo), "-I", str(path.parent), "-x", "c++", str(path)]))
        if source.endswith(".h"):
            views.append(self._preprocess(["-I", str(self.repo), "-x", "c++", str(self.repo / source)]))
        return views

    def _preprocess(self, args):
        """The tokens, or None where the preprocessor fails."""
        r = subprocess.run([CXX, "-std=c++17", "-E", "-P", *args], capture_output=True, text=True)
        return r.stdout.split() if r.returncode == 0 else None

    def compiled_unchanged(self, mutant, mutated_text):
        """Whether the mutant leaves every preprocessed view as it was (it
        lies in code only CUDA compiles). A view the preprocessor fails on
        unmutated (a header that is no host header: tile/language.h stops
        with #error there) is not one; a view it fails on mutated changed."""
        if mutant.path not in self._baseline:
            self._baseline[mutant.path] = self._views(mutant.path)
        with self._applied(mutant, mutated_text):
            views = self._views(mutant.path)
        return all(b is None or b == v for b, v in zip(self._baseline[mutant.path], views))

    # -- tests ---------------------------------------------------------------

    def test_files(self, source):
        files = [t for t, seen in self.seen_by.items() if source in seen]
        return sorted(files, key=lambda t: (FILE_COST.get(_file_name(t), 5), t))

    def _pytest(self, files, deselect, timeout):
        """(status, seconds, output tail): 'passed', 'failed' or 'timeout'."""
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *files]
        if deselect:
            cmd += ["-k", deselect]
        env = dict(os.environ, FA_EMU_BUILD_DIR=str(self.build), PYTHONDONTWRITEBYTECODE="1")
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=self.repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return "timeout", time.monotonic() - start, out[-2000:]
        # 5: nothing collected (every test deselected) is not a failure.
        status = "passed" if proc.returncode in (0, 5) else "failed"
        return status, time.monotonic() - start, out[-2000:]

    def baseline(self, timeout):
        """Builds every driver the tests load, unmutated; the tests must pass."""
        files = [f for f in sorted(self.seen_by) if _file_name(f) not in FULL_ONLY]
        status, seconds, out = self._pytest(files, QUICK_DESELECT, timeout)
        if status != "passed":
            raise RuntimeError(f"the unmutated tests do not pass in {self.repo}:\n{out}")
        return seconds

    def run(self, mutant, timeout):
        """('killed' | 'timeout' | 'survived' | 'not compiled for Metal',
        seconds, what killed it or the last output)."""
        original = (self.repo / mutant.path).read_text()
        mutated_text = mutant.apply(original)
        start = time.monotonic()
        if self.compiled_unchanged(mutant, mutated_text):
            return "not compiled for Metal", time.monotonic() - start, ""
        files = self.test_files(mutant.path)
        quick = [f for f in files if _file_name(f) not in FULL_ONLY]
        with self._applied(mutant, mutated_text):
            for phase_files, deselect in ((quick, QUICK_DESELECT), (files, None)):
                status, _, out = self._pytest(phase_files, deselect, timeout)
                if status != "passed":
                    verdict = "killed" if status == "failed" else "timeout"
                    return verdict, time.monotonic() - start, _first_failure(out)
        return "survived", time.monotonic() - start, ""

    class _Applied:
        def __init__(self, path, text):
            self.path, self.text = path, text

        def __enter__(self):
            self.original = self.path.read_text()
            self.path.write_text(self.text)

        def __exit__(self, *exc):
            self.path.write_text(self.original)

    def _applied(self, mutant, mutated_text):
        return self._Applied(self.repo / mutant.path, mutated_text)


def _file_name(test):
    """The file name of a test file or of one test's node id."""
    return os.path.basename(test.split("::")[0])


def _first_failure(out):
    for line in out.splitlines():
        if line.startswith("FAILED") or line.startswith("ERROR"):
            return line[:200]
    return out.strip().splitlines()[-1][:200] if out.strip() else ""
