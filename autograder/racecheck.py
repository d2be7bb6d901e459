"""Shared-memory races in a student's CUDA C kernel, found by compute-sanitizer's racecheck (lesson 03); and
reads past the tensors, found by its memcheck.

A missing barrier often gives the right numbers: on an H100 the v4 block reduction without its second
`block.sync()` (a warp writes the next partial while another warp still reads the last ones) was right in
200 of 200 runs. racecheck tracks every shared-memory access between barriers and reports such a hazard on
every run. The tool instruments the whole process it starts, so the launches are replayed elsewhere:

    with recording_cuda_launches() as launches:   # here: the student's launcher runs, its kernels do not
        launcher(x, weight, bias)
    verdict = run_racecheck(launches)             # there: compute-sanitizer --tool racecheck python racecheck.py

Run as a script (`python autograder/racecheck.py FILE`) it is that other process: it loads the recorded
launches, compiles each source with line information and launches it with the recorded arguments.

memcheck the same way (`run_memcheck`): a float4 load without its `c < C` guard whose lanes past C are left out of
the sum gives the right numbers, and in the grader's guarded buffers it reads only the guard band. Replayed on
tensors recorded without guards, with PyTorch's caching allocator off (each tensor its own cudaMalloc, exactly its
size), the read past the last row leaves its allocation, and memcheck says which line made it.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 180
SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
HAZARD = re.compile(r"(Error|Warning): (.*?hazard) detected at __shared__ (\S+) in block \((\S+)\)")
# "Read Thread (39,0,0) at block_sum(float, cooperative_groups::...)+0x670 in kernel.cu:13" (the file and line
# only when compiled with -lineinfo)
ACCESS = re.compile(r"(Read|Write) Thread \(([^)]*)\) at (.+?)\+0x[0-9a-f]+(?: in \S*?kernel\.cu:(\d+))?\s*$", re.M)
MEMCHECK_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
# "Invalid __global__ read of size 16 bytes", then lines "at <kernel>(...)+0x1b0 in kernel.cu:42" (the place's
# wording varies between versions: only the kernel.cu line number is relied on), "by thread (8,0,0) in block
# (4,0,0)", "Access to 0x7f... is out of bounds" and "and is 32 bytes after the nearest allocation ..."
INVALID = re.compile(r"Invalid (__\w+__) (read|write) of size (\d+) bytes?")
LINE = re.compile(r"kernel\.cu:(\d+)")
THREAD = re.compile(r"by thread \(([^)]*)\) in block \(([^)]*)\)")
AFTER = re.compile(r"(\d+) bytes? (after|before) the nearest allocation")


def _cuda_tool(name: str) -> str | None:
    """A CUDA toolkit command from PATH, CUDA_HOME, CUDA_PATH or /usr/local/cuda; None when there is none."""
    found = shutil.which(name)
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", name), os.X_OK):
            return os.path.join(home, "bin", name)
    return None


def sanitizer_path() -> str | None:
    """compute-sanitizer; None when the CUDA toolkit has none."""
    return _cuda_tool("compute-sanitizer")


def ncu_path() -> str | None:
    """Nsight Compute's command line (ncu); None when there is none."""
    return _cuda_tool("ncu")


def _pack(a):
    """A launch argument as it can be saved: a tensor as its whole storage (on the CPU) and its view of it, so
    that the replayed kernel sees the same bytes around the view; numbers as they were."""
    import torch

    if isinstance(a, torch.Tensor):
        base = torch.empty(0, dtype=a.dtype).set_(a.untyped_storage().cpu() if a.is_cuda else a.untyped_storage())
        return {"tensor": base.clone(), "offset": a.storage_offset(), "shape": tuple(a.shape),
                "stride": tuple(a.stride()), "cuda": a.is_cuda}
    return a


def _unpack(a):
    import torch

    if isinstance(a, dict) and "tensor" in a:
        base = a["tensor"].cuda() if a["cuda"] else a["tensor"]
        return torch.as_strided(base, a["shape"], a["stride"], a["offset"])
    return a


@contextlib.contextmanager
def recording_cuda_launches():
    """Within: helpers.cudac kernels are recorded (source, name, arguments, grid, block, shared), not run."""
    from helpers.cudac import CudaKernel

    launches: list[dict] = []
    original = CudaKernel.__call__

    def record(self, *args, grid, block, shared: int = 0):
        self.checked(args, grid, block, pointers=False)   # a launch the GPU would refuse is refused here too
        launches.append({"src": self.src, "name": self.name, "args": [_pack(a) for a in args], "grid": grid,
                         "block": block, "shared": shared})

    CudaKernel.__call__ = record
    try:
        yield launches
    finally:
        CudaKernel.__call__ = original


def parse_report(text: str, sources: dict[str, str]) -> tuple[int, str]:
    """(hazards, what the first one is) from racecheck's output; sources: kernel name -> its CUDA C, to quote
    the lines of the two accesses."""
    m = SUMMARY.search(text)
    if m is None:
        raise ValueError("no RACECHECK SUMMARY in compute-sanitizer's output")
    errors, warnings = int(m.group(2)), int(m.group(3))
    hazard = HAZARD.search(text)
    if not (errors + warnings) or hazard is None:
        return errors + warnings, ""
    accesses = ACCESS.findall(text[hazard.end():hazard.end() + 3000])[:2]
    only = set(sources.values())
    parts = []
    for kind, thread, function, line in accesses:
        function = function.split("(")[0].strip()
        where = f"thread ({thread}) in {function}"
        src = sources.get(function) or (next(iter(only)) if len(only) == 1 else "")
        src_lines = src.splitlines()
        if line and 0 < int(line) <= len(src_lines):
            where += f", line {line} `{src_lines[int(line) - 1].strip()}`"
        parts.append(f"{kind.lower()} by {where}")
    return errors + warnings, f"{hazard.group(2)} on shared memory in block ({hazard.group(4)}): " + "; ".join(parts)


def parse_memcheck(text: str, sources: dict[str, str]) -> tuple[int, str]:
    """(errors, what the first one is) from memcheck's output; sources: kernel name -> its CUDA C."""
    m = MEMCHECK_SUMMARY.search(text)
    if m is None:
        raise ValueError("no ERROR SUMMARY in compute-sanitizer's output")
    errors = int(m.group(1))
    first = INVALID.search(text)
    if not errors or first is None:
        return errors, ""
    space, verb, size = first.groups()
    block = text[first.end():first.end() + 1500].split("Invalid ")[0]
    what = f"a {size}-byte {verb} of {space.strip('_')} memory outside every allocation"
    if (line := LINE.search(block)) is not None:
        # the `at` line names the function that made the access: a kernel, or a __device__ function it called,
        # whose kernel memcheck names in the error's device frames (the caller of block_sum is not the first
        # kernel recorded)
        at = block[:line.end()].splitlines()[-1]
        named = sorted((hit.start(), k) for k in sources if (hit := re.search(rf"\b{re.escape(k)}\b", block)))
        kernel = next((k for k in sources if re.search(rf"\b{re.escape(k)}\b", at)),
                      named[0][1] if named else "")
        texts = set(sources.values())
        src = sources[kernel] if kernel else (next(iter(texts)) if len(texts) == 1 else "")
        src_lines = src.splitlines()
        n = int(line.group(1))
        if 0 < n <= len(src_lines):
            what += f", in {kernel + ' ' if kernel else ''}line {n} `{src_lines[n - 1].strip()}`"
        elif not kernel:
            what += f", at line {n} of the CUDA C"
    if (thread := THREAD.search(block)) is not None:
        what += f" (thread ({thread.group(1)}) of block ({thread.group(2)}))"
    if (near := AFTER.search(block)) is not None:
        what += ", past the end of a tensor" if near.group(2) == "after" else ", before the start of a tensor"
    return errors, what


def _replay_under(tool_args: list[str], launches: list[dict], timeout_s: float, env_extra: dict,
                  tool: str | None = None) -> str:
    """compute-sanitizer's output (or `tool`'s) for the recorded launches replayed in another process."""
    import torch

    tool = tool or sanitizer_path()
    if tool is None:
        raise RuntimeError("compute-sanitizer not found (it comes with the CUDA toolkit)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "launches.pt")
        torch.save(launches, path)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   **env_extra)
        proc = subprocess.run([tool, *tool_args, sys.executable, __file__, path], capture_output=True, text=True,
                              timeout=timeout_s, env=env, cwd=ROOT)
    return proc.stdout + proc.stderr


def _did_not_run(text: str) -> RuntimeError:
    """The replay's own error (in words that do not claim this process's context broke), not PyTorch's boilerplate."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and "=========" not in line]
    said = next((line for line in lines if re.search(r"CUDA error|Error: |LogicError|cuda\w*Error", line)), None)
    tail = said or " | ".join(lines[-3:])
    return RuntimeError(f"the kernel failed when replayed in another process under the tool: {tail[-300:]}")


def run_racecheck(launches: list[dict], timeout_s: float = TIMEOUT_S) -> tuple[int, str]:
    """Replay the recorded launches under compute-sanitizer's racecheck in another process; (hazards, the
    first hazard said in words). Raises RuntimeError when the replay itself fails."""
    text = _replay_under(["--tool", "racecheck", "--racecheck-report", "all", "--print-limit", "4"], launches,
                         timeout_s, {})
    if "REPLAY DONE" not in text:
        raise _did_not_run(text)
    return parse_report(text, {launch["name"]: launch["src"] for launch in launches})


def run_memcheck(launches: list[dict], timeout_s: float = TIMEOUT_S) -> tuple[int, str]:
    """Replay the recorded launches under compute-sanitizer's memcheck in another process, every tensor its own
    allocation of exactly its size; (errors, the first one said in words). An error stops the replay (the launch
    fails), so an ERROR SUMMARY is enough; without one, RuntimeError."""
    text = _replay_under(["--tool", "memcheck", "--print-limit", "4"], launches, timeout_s,
                         {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    if "REPLAY DONE" not in text and not (MEMCHECK_SUMMARY.search(text) and INVALID.search(text)):
        raise _did_not_run(text)
    return parse_memcheck(text, {launch["name"]: launch["src"] for launch in launches})


# bytes the kernel's global loads asked for, thread by thread (not the 32-byte sectors they touched: a load pattern
# that is not coalesced touches more sectors, but reads x once)
LOAD_METRIC = "smsp__sass_data_bytes_mem_global_op_ld.sum"


def run_ncu_loads(launches: list[dict], kernels: tuple, timeout_s: float = TIMEOUT_S) -> dict[str, float]:
    """Replay the recorded launches under Nsight Compute; {kernel name: bytes its loads requested from global
    memory, summed over its launches}. Raises RuntimeError when the replay fails, CaseSkipped where the GPU's
    counters cannot be read here."""
    import csv

    from .registry import CaseSkipped
    from .runner import one_at_a_time

    names = sorted({launch["name"] for launch in launches if launch["name"] in kernels})
    # one profiler at a time on a GPU: a second ncu (the CLI's --jobs) reads its counters as nan
    with one_at_a_time("ncu"):
        for attempt in range(2):
            text = _replay_under(["--metrics", LOAD_METRIC, "--csv", "--print-units", "base", "-k",
                                  "regex:^(" + "|".join(map(re.escape, names)) + ")$"], launches, timeout_s, {},
                                 tool=ncu_path())
            # ncu itself can fail to profile a correct kernel while the GPU is busy with other processes (once on
            # an H100 running 14 test processes: "Failed to profile ... returned an error code (9)"; the same
            # solution passed alone): one more replay before it counts against the student
            if "REPLAY DONE" in text or "Failed to profile" not in text:
                break
    if "ERR_NVGPUCTRPERM" in text:   # Colab and many shared hosts keep the counters to root
        raise CaseSkipped("Nsight Compute may not read this GPU's performance counters here (ERR_NVGPUCTRPERM: "
                          "profiling is limited to administrators on this machine)")
    if "REPLAY DONE" not in text:
        raise _did_not_run(text)
    found: dict[str, float] = {}
    for row in csv.reader(line for line in text.splitlines() if line.startswith('"')):
        if len(row) > 4 and row[-3] == LOAD_METRIC:
            value = float(row[-1].replace(",", ""))
            if value != value:   # nan: the counters could not be read (another profiler held them)
                raise CaseSkipped(f"Nsight Compute read {LOAD_METRIC} as nan for {row[4]} (another profiler held "
                                  "the GPU's counters?)")
            found[row[4]] = found.get(row[4], 0.0) + value
    if not found:
        raise RuntimeError(f"ncu printed no {LOAD_METRIC}: {text[-300:]}")
    return found


def replay(path: str) -> None:
    """The other process: compile each recorded source with -lineinfo (racecheck then names source lines) and
    launch it with the recorded arguments."""
    import torch
    from helpers import cudac

    launches = torch.load(path, weights_only=False)
    cudac.context()
    from pycuda.compiler import SourceModule

    modules = {}
    for launch in launches:
        code = cudac.c_source(launch["src"])
        if code not in modules:
            modules[code] = SourceModule(code, no_extern_c=True, arch=cudac.device_arch(),
                                         options=[*cudac.NVCC_OPTIONS, "-lineinfo"])
        kernel = cudac.CudaKernel(modules[code].get_function(launch["name"]), launch["name"], launch["src"])
        kernel._params = None   # its arguments were checked against its parameters when the launch was recorded
        kernel(*[_unpack(a) for a in launch["args"]], grid=launch["grid"], block=launch["block"],
               shared=launch["shared"])
    torch.cuda.synchronize()
    print("REPLAY DONE", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    replay(sys.argv[1])
