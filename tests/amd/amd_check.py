#!/usr/bin/env python3
"""AMD ISA compile check for turbo3.

Compiles every tests/amd/*.hip for each AMD target with clang (device only, to assembly), reads the
AMDGPU metadata of every kernel and prints its resources: VGPRs, AGPRs, SGPRs, LDS, scratch, spills
and wave size. Fails (exit 1) on:
  - a compile error;
  - a kernel that reaches a call to a symbol not defined in its module (a leftover __ocml_/__ockl_
    call or any other external function), or that uses a dynamic stack (indirect or external call,
    recursion): the register and scratch counts reported for it would be guesses;
  - a broken ISA assertion. A .hip file may carry lines
        // amd-check: <kernel>[@<arch>] no-fma              no floating-point FMA / MAD
        // amd-check: <kernel>[@<arch>] forbid <regex>      no instruction line matches regex
        // amd-check: <kernel>[@<arch>] require <regex>     some instruction line matches regex
        // amd-check: <kernel>[@<arch>] max <metric> <n>    metadata limit; metric is one of
                                                           vgpr agpr sgpr lds scratch vgpr_spill sgpr_spill
    where <kernel> is a kernel's short name (as printed in the table) or an fnmatch pattern over
    it, and <arch> an optional fnmatch pattern over the target (default: every target).
    Instructions are those of the kernel and of every function it calls. An assertion that
    matches no kernel on a target where it applies fails too (it went stale).
Exit code 2 means the toolchain is missing (clang, HIP headers or device bitcode).

--selftest compiles tests/amd/selftest/*.hip instead; each of those declares the failures it must
produce (`// amd-check-expect: undefined-call dynamic-stack rule compile-error`), so the checks
themselves are tested.

Only the Python standard library is used.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_ARCHS = ["gfx1201", "gfx1100", "gfx942"]

# ---- toolchain discovery -------------------------------------------------------------------------

CLANG_CANDIDATES = ["clang++-19", "clang++"]
HIP_INCLUDE_CANDIDATES = ["/opt/rocm/include", "/usr/include", "/usr/local/include"]
BITCODE_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
    "/usr/lib/aarch64-linux-gnu/amdgcn/bitcode",
    "/opt/rocm/amdgcn/bitcode",
    "/opt/rocm/lib/llvm/lib/clang/*/lib/amdgcn/bitcode",
    "/usr/lib/llvm-19/lib/clang/19/lib/amdgcn/bitcode",
]
# Directories the compiler already searches as system directories: never pass them again, since an
# explicit -isystem would move them ahead of the C++ library headers and break #include_next.
DEFAULT_SYSTEM_DIRS = {"/usr/include", "/usr/local/include"}

# Device-library ISA stand-ins for targets newer than the installed bitcode. The ISA-version control
# only steers a few ocml/ockl code paths; kernels must not call into those libraries anyway.
ISA_STAND_INS = {
    "gfx11": ["1030"],
    "gfx12": ["1030"],
    "gfx94": ["940", "90a", "908", "906"],
    "gfx95": ["940", "90a", "908", "906"],
}


def _which(name: str | None) -> str | None:
    if not name:
        return None
    if os.path.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name)


def find_clang(explicit: str | None) -> str | None:
    for name in ([explicit] if explicit else []) + [os.environ.get("TURBO3_AMD_CLANG")] + CLANG_CANDIDATES:
        path = _which(name)
        if path and _clang_has_amdgcn(path):
            return path
        if explicit:
            return None
    return None


def _clang_has_amdgcn(clang: str) -> bool:
    try:
        out = subprocess.run([clang, "-print-targets"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "amdgcn" in out


def find_hip_include(explicit: str | None) -> str | None:
    for d in ([explicit] if explicit else []) + [os.environ.get("TURBO3_HIP_INCLUDE_DIR")] + HIP_INCLUDE_CANDIDATES:
        if d and os.path.isfile(os.path.join(d, "hip", "hip_runtime.h")):
            return os.path.abspath(d)
        if explicit:
            return None
    return None


def find_bitcode(explicit: str | None) -> str | None:
    for pattern in ([explicit] if explicit else []) + [os.environ.get("TURBO3_AMDGCN_BITCODE_DIR")] + BITCODE_CANDIDATES:
        if not pattern:
            continue
        for d in sorted(glob.glob(pattern), reverse=True):
            if all(os.path.isfile(os.path.join(d, f)) for f in ("ocml.bc", "ockl.bc")):
                return os.path.abspath(d)
        if explicit:
            return None
    return None


def find_cxxfilt(clang: str) -> str | None:
    llvm_bin = os.path.dirname(os.path.realpath(clang))
    for cand in (os.path.join(llvm_bin, "llvm-cxxfilt"), "llvm-cxxfilt-19", "llvm-cxxfilt", "c++filt"):
        path = _which(cand)
        if path:
            return path
    return None


def clang_version(clang: str) -> str:
    out = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0].strip() if out else "unknown"


def hip_version(hip_include: str) -> str:
    try:
        text = open(os.path.join(hip_include, "hip", "hip_version.h")).read()
    except OSError:
        return "unknown"
    parts = [re.search(rf"#define\s+HIP_VERSION_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else "unknown"


# ---- compile flags -------------------------------------------------------------------------------

def arch_is_wave64(arch: str) -> bool:
    # GFX9 (incl. CDNA) runs wave64 only; GFX10+ compile for wave32 unless told otherwise.
    return re.fullmatch(r"gfx9\w+", arch) is not None


def isa_bitcode(bitcode_dir: str, arch: str) -> tuple[str, bool]:
    """The oclc_isa_version file for arch and whether it is a stand-in."""
    own = arch[3:]
    if os.path.isfile(os.path.join(bitcode_dir, f"oclc_isa_version_{own}.bc")):
        return f"oclc_isa_version_{own}.bc", False
    for prefix, versions in ISA_STAND_INS.items():
        if arch.startswith(prefix):
            for v in versions:
                if os.path.isfile(os.path.join(bitcode_dir, f"oclc_isa_version_{v}.bc")):
                    return f"oclc_isa_version_{v}.bc", True
    raise RuntimeError(f"no oclc_isa_version bitcode for {arch} (or a stand-in) in {bitcode_dir}")


def device_libs(bitcode_dir: str, arch: str) -> list[str]:
    isa, _ = isa_bitcode(bitcode_dir, arch)
    libs = [
        # Device libraries of ROCm <= 5.x ship hip.bc (clang's ROCm driver links it when present): the
        # HIP headers of that era implement __syncthreads and __threadfence with functions from it.
        "hip.bc",
        "ocml.bc",
        "ockl.bc",
        isa,
        "oclc_wavefrontsize64_on.bc" if arch_is_wave64(arch) else "oclc_wavefrontsize64_off.bc",
        "oclc_daz_opt_off.bc",
        "oclc_finite_only_off.bc",
        "oclc_unsafe_math_off.bc",
        "oclc_correctly_rounded_sqrt_on.bc",
        # clang 19 emits code object v5 by default.
        "oclc_abi_version_500.bc",
    ]
    return [os.path.join(bitcode_dir, f) for f in libs if os.path.isfile(os.path.join(bitcode_dir, f))]


@dataclass
class Toolchain:
    clang: str
    hip_include: str
    bitcode_dir: str
    cxxfilt: str | None
    resource_dir: str


def compile_command(tc: Toolchain, src: str, arch: str, out: str, include_dir: str) -> list[str]:
    cmd = [tc.clang, "-x", "hip", "-std=c++17", "-O3", "-Wall", "-Wextra",
           f"--offload-arch={arch}", "--cuda-device-only", "-S", "-nogpulib", "-nogpuinc",
           "-D__HIP_PLATFORM_AMD__"]
    # HIP <= 6 headers include <include/cuda_wrappers/...> relative to the parent of clang's
    # resource include directory (hipcc passes the same directory).
    cmd += ["-isystem", tc.resource_dir]
    if os.path.realpath(tc.hip_include) not in DEFAULT_SYSTEM_DIRS:
        cmd += ["-isystem", tc.hip_include]
    cmd += ["-I", include_dir]
    for lib in device_libs(tc.bitcode_dir, arch):
        cmd += ["-Xclang", "-mlink-builtin-bitcode", "-Xclang", lib]
    cmd += [src, "-o", out]
    return cmd


# ---- assembly parsing ----------------------------------------------------------------------------

@dataclass
class Kernel:
    symbol: str
    meta: dict[str, str]
    name: str = ""               # short demangled name
    demangled: str = ""
    undefined: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)   # instruction lines of the kernel and its callees


RELOC_RE = re.compile(r"([A-Za-z_.$][\w.$]*)@(?:rel32|gotpcrel32|gotpcrel|abs32|abs64|rel64|gotoff|got|plt)\b")
CALL_RE = re.compile(r"^\s*s_call_b64\s+[^,]+,\s*([A-Za-z_.$][\w.$]*)")
LIB_RE = re.compile(r"\b(__ocml_\w+|__ockl_\w+|__oclc_\w+|__asan_\w+)")
LABEL_RE = re.compile(r"^([A-Za-z_.$][\w.$]*):")
SET_RE = re.compile(r"^\s*\.(?:set|equ|amdgpu_lds|comm|lcomm)\s+([A-Za-z_.$][\w.$]*)")
TYPE_FN_RE = re.compile(r"^\s*\.type\s+([A-Za-z_.$][\w.$]*),\s*@function")
META_KEY_RE = re.compile(r"^(?:  - |    )\.([\w]+):\s*(.*?)\s*$")


def parse_assembly(text: str) -> list[Kernel]:
    lines = text.splitlines()

    # Kernel metadata (YAML, read line by line: only the top-level keys of each kernel entry).
    kernels: list[Kernel] = []
    in_meta = in_kernels = False
    for line in lines:
        s = line.strip()
        if s == ".amdgpu_metadata":
            in_meta = True
            continue
        if s == ".end_amdgpu_metadata":
            in_meta = False
            continue
        if not in_meta:
            continue
        if line.startswith("amdhsa.kernels:"):
            in_kernels = True
            continue
        if line and not line.startswith(" ") and not line.startswith("-"):
            in_kernels = False
            continue
        if not in_kernels:
            continue
        if line.startswith("  - "):
            kernels.append(Kernel(symbol="", meta={}))
        m = META_KEY_RE.match(line)
        if m and kernels:
            kernels[-1].meta[m.group(1)] = m.group(2)
    for k in kernels:
        k.symbol = k.meta.get("name", "?")

    # Functions, the symbols each references, and the symbols the module defines.
    functions = set()
    defined = set()
    for line in lines:
        m = TYPE_FN_RE.match(line)
        if m:
            functions.add(m.group(1))
        m = LABEL_RE.match(line) or SET_RE.match(line)
        if m:
            defined.add(m.group(1))
    refs: dict[str, set[str]] = {}
    bodies: dict[str, list[str]] = {}
    current = None
    for line in lines:
        m = LABEL_RE.match(line)
        if m and m.group(1) in functions:
            current = m.group(1)
            refs[current] = set()
            bodies[current] = []
            continue
        if current is None:
            continue
        if line.startswith(".Lfunc_end"):
            current = None
            continue
        code = line.split(";", 1)[0]
        if not code.strip() or code.lstrip().startswith("."):
            continue
        bodies[current].append(code.rstrip())
        for rx in (RELOC_RE, CALL_RE, LIB_RE):
            for mm in rx.finditer(code):
                refs[current].add(mm.group(1))

    for k in kernels:
        seen, stack, undefined, body = set(), [k.symbol], set(), []
        while stack:
            fn = stack.pop()
            if fn in seen:
                continue
            seen.add(fn)
            body += bodies.get(fn, [])
            for r in refs.get(fn, ()):
                if LIB_RE.fullmatch(r) or r not in defined:
                    undefined.add(r)
                elif r in functions:
                    stack.append(r)
        k.undefined = sorted(undefined)
        k.body = body
    return kernels


# ---- names ---------------------------------------------------------------------------------------

def demangle(names: list[str], cxxfilt: str | None) -> dict[str, str]:
    if not cxxfilt or not names:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True, text=True)
    res = out.stdout.splitlines()
    if out.returncode != 0 or len(res) != len(names):
        return {n: n for n in names}
    # Demanglers differ in how they close nested templates (LLVM 14 and GNU c++filt write "> >",
    # LLVM 19 ">>"): one spelling, so that the report and the assertions do not depend on which ran.
    return {n: re.sub(r">(?: >)+", lambda m: ">" * (m.group(0).count(">")), r) for n, r in zip(names, res)}


def short_name(demangled: str) -> str:
    s = demangled.strip()
    # Drop the parameter list: the parenthesized group that closes the name.
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
    # Drop a return type (template functions) and the namespaces, at template depth 0.
    def split_top(text: str, sep: str) -> list[str]:
        parts, depth, start, i = [], 0, 0, 0
        while i < len(text):
            c = text[i]
            if c in "<([":
                depth += 1
            elif c in ">)]":
                depth -= 1
            elif depth == 0 and text.startswith(sep, i):
                parts.append(text[start:i])
                i += len(sep)
                start = i
                continue
            i += 1
        parts.append(text[start:])
        return parts
    s = split_top(s, " ")[-1]
    return split_top(s, "::")[-1] or demangled


# ---- assertions in the sources -------------------------------------------------------------------

FMA_RE = (r"\bv_(?:pk_|dual_)?(?:fma|fmac|fmaak|fmamk|mad|mac|madak|madmk)(?:_legacy)?_f(?:16|32|64)(?!\d)"
          r"|\bv_fma_mix\w*")
DIRECTIVE_RE = re.compile(r"^\s*//\s*amd-check:\s*(\S+)\s+(no-fma|forbid|require|max)\b\s*(.*?)\s*$")
EXPECT_RE = re.compile(r"^\s*//\s*amd-check-expect:\s*(.*?)\s*$")
# `max <metric> <n>`: metadata limits.
METRICS = {
    "vgpr": "vgpr_count", "agpr": "agpr_count", "sgpr": "sgpr_count", "lds": "group_segment_fixed_size",
    "scratch": "private_segment_fixed_size", "vgpr_spill": "vgpr_spill_count", "sgpr_spill": "sgpr_spill_count",
}


@dataclass
class Rule:
    kernel: str        # fnmatch pattern over the kernel's short name
    arch: str          # fnmatch pattern over the target
    kind: str          # forbid | require | max
    arg: str           # regex, or "metric n"
    text: str


def read_rules(src: str) -> tuple[list[Rule], list[str]]:
    """The `// amd-check:` assertions of a source, and the malformed ones."""
    rules, bad = [], []
    with open(src, encoding="utf-8") as f:
        for line in f:
            m = DIRECTIVE_RE.match(line)
            if not m:
                if re.match(r"^\s*//\s*amd-check:", line):
                    bad.append(f"malformed assertion: {line.strip()}")
                continue
            sel, kind, arg = m.groups()
            kernel, _, arch = sel.partition("@")
            text = f"{sel} {kind} {arg}".strip()
            if kind == "no-fma":
                kind, arg = "forbid", FMA_RE
            if kind == "max":
                parts = arg.split()
                if len(parts) != 2 or parts[0] not in METRICS or not parts[1].isdigit():
                    bad.append(f"malformed assertion (max {'|'.join(METRICS)} <n>): {line.strip()}")
                    continue
            elif kind in ("forbid", "require"):
                try:
                    re.compile(arg)
                except re.error as e:
                    bad.append(f"bad regex in '{line.strip()}': {e}")
                    continue
            rules.append(Rule(kernel, arch or "*", kind, arg, text))
    return rules, bad


def read_expectations(src: str) -> dict[str, int | None] | None:
    """`// amd-check-expect: cat[=count] ...`: the failure categories (and message counts) a self-test
    file must produce on every target."""
    with open(src, encoding="utf-8") as f:
        for line in f:
            m = EXPECT_RE.match(line)
            if m:
                out: dict[str, int | None] = {}
                for item in m.group(1).split():
                    cat, _, count = item.partition("=")
                    out[cat] = int(count) if count else None
                return out
    return None


def check_rules(rules: list[Rule], kernels: list[Kernel], arch: str) -> list[str]:
    problems = []
    for r in rules:
        if not fnmatch.fnmatchcase(arch, r.arch):
            continue
        matched = [k for k in kernels if k.name == r.kernel or fnmatch.fnmatchcase(k.name, r.kernel)]
        if not matched:
            problems.append(f"assertion '{r.text}' matches no kernel")
            continue
        if r.kind == "max":
            metric, limit = r.arg.split()
            for k in matched:
                value = int(k.meta.get(METRICS[metric], "0"))
                if value > int(limit):
                    problems.append(f"{k.name}: '{r.text}' violated: {metric} = {value}")
            continue
        rx = re.compile(r.arg)
        for k in matched:
            hits = [l.strip() for l in k.body if rx.search(l)]
            if r.kind == "forbid" and hits:
                problems.append(f"{k.name}: '{r.text}' violated by: " + "; ".join(hits[:3]))
            elif r.kind == "require" and not hits:
                problems.append(f"{k.name}: '{r.text}' not satisfied")
    return problems


# ---- one compilation -----------------------------------------------------------------------------

@dataclass
class Result:
    src: str
    arch: str
    cmd: list[str]
    ok_compile: bool = True
    log: str = ""
    kernels: list[Kernel] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)   # category -> messages


def run_one(tc: Toolchain, src: str, arch: str, work_dir: str, include_dir: str) -> Result:
    stem = os.path.splitext(os.path.basename(src))[0]
    out = os.path.join(work_dir, f"{stem}.{arch}.s")
    cmd = compile_command(tc, src, arch, out, include_dir)
    res = Result(src=src, arch=arch, cmd=cmd)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    res.log = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        res.ok_compile = False
        res.problems["compile-error"] = [f"clang exited with {proc.returncode}"]
        return res
    with open(out, encoding="utf-8", errors="replace") as f:
        res.kernels = parse_assembly(f.read())
    return res


def finish(results: list[Result], tc: Toolchain) -> None:
    """Demangle names (one cxxfilt call) and evaluate the checks."""
    symbols = sorted({k.symbol for r in results for k in r.kernels})
    dem = demangle(symbols, tc.cxxfilt)
    for r in results:
        for k in r.kernels:
            k.demangled = dem.get(k.symbol, k.symbol)
            k.name = short_name(k.demangled)
        # Overloads share a short name: fall back to the demangled name with its parameters.
        names = [k.name for k in r.kernels]
        for k in r.kernels:
            if names.count(k.name) > 1:
                k.name = k.demangled.split("::", 1)[-1] if "::" in k.demangled else k.demangled
        if not r.ok_compile:
            continue
        for k in r.kernels:
            if k.undefined:
                r.problems.setdefault("undefined-call", []).append(
                    f"{k.name}: references undefined symbol(s) " + ", ".join(k.undefined))
            if k.meta.get("uses_dynamic_stack", "false") == "true":
                r.problems.setdefault("dynamic-stack", []).append(
                    f"{k.name}: uses a dynamic stack (indirect, external or recursive call); "
                    "its register and scratch counts are not exact")
        rules, malformed = read_rules(r.src)
        problems = malformed + check_rules(rules, r.kernels, r.arch)
        if problems:
            r.problems["rule"] = problems


# ---- report --------------------------------------------------------------------------------------

COLUMNS = [
    ("file", None), ("kernel", None), ("arch", None),
    ("VGPRs", "vgpr_count"), ("AGPRs", "agpr_count"), ("SGPRs", "sgpr_count"),
    ("LDS bytes", "group_segment_fixed_size"), ("scratch bytes", "private_segment_fixed_size"),
    ("VGPR spills", "vgpr_spill_count"), ("SGPR spills", "sgpr_spill_count"), ("wave", "wavefront_size"),
]


def table_rows(results: list[Result], archs: list[str]) -> list[list[str]]:
    rows = []
    order = {a: i for i, a in enumerate(archs)}
    entries = []
    for r in results:
        for idx, k in enumerate(r.kernels):
            entries.append((os.path.basename(r.src), idx, k.name, order.get(r.arch, 99), r.arch, k))
    # Group by file, kernel (in source order), then arch.
    first_index: dict[tuple[str, str], int] = {}
    for f, idx, name, _, _, _ in entries:
        first_index.setdefault((f, name), idx)
    entries.sort(key=lambda e: (e[0], first_index[(e[0], e[2])], e[2], e[3]))
    for f, _, name, _, arch, k in entries:
        row = [f, name, arch]
        for _, key in COLUMNS[3:]:
            row.append(k.meta.get(key, "-"))
        rows.append(row)
    return rows


def format_text(rows: list[list[str]]) -> str:
    header = [c for c, _ in COLUMNS]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i]) for i in range(len(header))]
    def fmt(r):
        return "  ".join(v.ljust(widths[i]) if i < 3 else v.rjust(widths[i]) for i, v in enumerate(r))
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


def format_markdown(rows: list[list[str]], tc: Toolchain, archs: list[str]) -> str:
    stand_ins = []
    for a in archs:
        isa, is_stand_in = isa_bitcode(tc.bitcode_dir, a)
        if is_stand_in:
            stand_ins.append(f"{a}: {isa}")
    lines = [
        "# AMD kernel resources",
        "",
        "Generated by `tests/amd/amd_check.py --markdown` (the `turbo3_amd_resources` build target); do not edit.",
        "Device-only compiles at `-O3`, per-kernel numbers from the AMDGPU metadata of each object.",
        "",
        f"- compiler: {clang_version(tc.clang)}",
        f"- HIP headers: {hip_version(tc.hip_include)}",
        "- device-library ISA stand-ins: " + (", ".join(stand_ins) if stand_ins else "none"),
        "",
        "| " + " | ".join(c for c, _ in COLUMNS) + " |",
        "|" + "|".join("---" if i < 3 else "---:" for i in range(len(COLUMNS))) + "|",
    ]
    for r in rows:
        cells = [f"`{v}`" if i == 1 else v for i, v in enumerate(r)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


# ---- main ----------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="*", help=".hip files (default: every tests/amd/*.hip)")
    ap.add_argument("--arch", action="append", help="target (repeatable or comma-separated; default: "
                    + ",".join(DEFAULT_ARCHS) + ")")
    ap.add_argument("--jobs", "-j", type=int, default=0, help="parallel compiles (default: CPU count)")
    ap.add_argument("--markdown", metavar="PATH", help="also write the table as Markdown to PATH")
    ap.add_argument("--clang", help="clang++ with the AMDGPU target (default: clang++-19, clang++)")
    ap.add_argument("--hip-include", help="directory holding hip/hip_runtime.h")
    ap.add_argument("--bitcode-dir", help="directory holding ocml.bc, ockl.bc, oclc_*.bc")
    ap.add_argument("--include", default=os.path.join(REPO, "include"), help="the library's include dir")
    ap.add_argument("--work-dir", help="keep the .s files here (default: a temporary directory)")
    ap.add_argument("--selftest", action="store_true", help="check the checker on tests/amd/selftest/*.hip")
    ap.add_argument("--probe", action="store_true", help="only report the toolchain found (exit 2 if incomplete)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every compile command")
    args = ap.parse_args()

    archs = [a for spec in (args.arch or DEFAULT_ARCHS) for a in spec.split(",") if a]
    clang = find_clang(args.clang)
    hip_include = find_hip_include(args.hip_include)
    bitcode = find_bitcode(args.bitcode_dir)
    missing = [n for n, v in (("clang++ with the AMDGPU target", clang), ("HIP headers (hip/hip_runtime.h)", hip_include),
                              ("AMDGPU device bitcode (ocml.bc, ockl.bc)", bitcode)) if not v]
    if args.probe:
        print(f"clang={clang or ''}\nhip_include={hip_include or ''}\nbitcode_dir={bitcode or ''}")
    if missing:
        print("amd_check: missing " + "; ".join(missing), file=sys.stderr)
        return 2
    resource_dir = subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True).stdout.strip()
    tc = Toolchain(clang=clang, hip_include=hip_include, bitcode_dir=bitcode, cxxfilt=find_cxxfilt(clang),
                   resource_dir=os.path.dirname(resource_dir) if resource_dir.endswith("/include") else resource_dir)
    try:
        for a in archs:
            isa_bitcode(bitcode, a)
    except RuntimeError as e:
        print(f"amd_check: {e}", file=sys.stderr)
        return 2
    if args.probe:
        return 0

    if args.sources:
        sources = [os.path.abspath(s) for s in args.sources]
    elif args.selftest:
        sources = sorted(glob.glob(os.path.join(HERE, "selftest", "*.hip")))
    else:
        sources = sorted(glob.glob(os.path.join(HERE, "*.hip")))
    if not sources:
        print("amd_check: no .hip sources found", file=sys.stderr)
        return 1

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = args.jobs if args.jobs > 0 else cpus
    tmp = None
    if args.work_dir:
        work_dir = os.path.abspath(args.work_dir)
        os.makedirs(work_dir, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="turbo3_amd_")
        work_dir = tmp.name

    print(f"amd_check: {clang_version(clang)}; HIP headers {hip_version(hip_include)} in {hip_include}; "
          f"bitcode {bitcode}")
    for a in archs:
        isa, stand_in = isa_bitcode(bitcode, a)
        print(f"amd_check: {a}: wave{'64' if arch_is_wave64(a) else '32'}, {isa}" + (" (stand-in)" if stand_in else ""))
    print(f"amd_check: {len(sources)} file(s) x {len(archs)} arch(s), {jobs} job(s)")

    tasks = [(s, a) for s in sources for a in archs]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_one, tc, s, a, work_dir, args.include) for s, a in tasks]
        results = [f.result() for f in futures]
    finish(results, tc)
    if tmp:
        tmp.cleanup()

    # Logs: compile errors and warnings, and the command where something went wrong.
    for r in results:
        if args.selftest and not args.verbose:
            continue  # the self-test's own failures are expected; its summary says what was found
        if r.log or args.verbose or not r.ok_compile:
            print(f"\n--- {os.path.basename(r.src)} [{r.arch}]")
            if args.verbose or not r.ok_compile:
                print(" ".join(r.cmd))
            if r.log:
                print(r.log)

    rows = table_rows(results, archs)
    print()
    print(format_text(rows) if rows else "(no kernels)")

    if args.selftest:
        return report_selftest(results)

    failures = [(r, cat, msg) for r in results for cat, msgs in r.problems.items() for msg in msgs]
    if args.markdown and not failures:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(format_markdown(rows, tc, archs))
        print(f"\namd_check: wrote {args.markdown}")
    n_kernels = sum(len(r.kernels) for r in results)
    if failures:
        print(f"\namd_check: FAILED ({len(failures)} problem(s))")
        for r, cat, msg in failures:
            print(f"  {os.path.basename(r.src)} [{r.arch}] {cat}: {msg}")
        return 1
    print(f"\namd_check: OK: {n_kernels} kernel builds over {len(sources)} file(s) and {len(archs)} arch(s); "
          "no unresolved calls, no dynamic stacks, all ISA assertions hold")
    return 0


def report_selftest(results: list[Result]) -> int:
    bad = []
    for r in results:
        expected = read_expectations(r.src)
        got = set(r.problems)
        name = f"{os.path.basename(r.src)} [{r.arch}]"
        if expected is None:
            bad.append(f"{name}: no '// amd-check-expect:' line")
        elif got != set(expected) or any(n is not None and len(r.problems[c]) != n
                                         for c, n in expected.items() if c in r.problems):
            want = " ".join(c if n is None else f"{c}={n}" for c, n in sorted(expected.items()))
            have = " ".join(f"{c}={len(m)}" for c, m in sorted(r.problems.items()))
            bad.append(f"{name}: expected [{want}], got [{have}]: "
                       + "; ".join(m for msgs in r.problems.values() for m in msgs))
        else:
            print(f"amd_check selftest: {name}: detected {sorted(got)} as expected")
            for cat, msgs in sorted(r.problems.items()):
                for m in msgs:
                    print(f"    {cat}: {m}")
    if bad:
        print("\namd_check selftest: FAILED")
        for b in bad:
            print("  " + b)
        return 1
    print("\namd_check selftest: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
