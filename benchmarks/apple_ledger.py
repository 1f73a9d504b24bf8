"""The Apple API ledger, checked by a machine (issue 34): every row of docs/architecture.md's "Apple API ledger" holds a
claim this script checks against the real macOS arm64 wheels of what constraints.txt pins (torch, torchvision,
coremltools, zeus-apple-silicon, psutil, mlx, mlx-lm, keyring; psutil's macOS C source from its sdist; Foundation's
constants from pyobjc-framework-Cocoa), downloaded by pip and read where they lie (zip members, Mach-O symbol tables, strings).
A fake written from the documentation is kinder than the implementation; these claims are what the test fakes
(tests/support/fake_mps.py) copy.

    python benchmarks/apple_ledger.py [--torch VERSION] [--torch-table] [--cache DIR]     (make apple-check)

Each row prints ✓ or ✗ with its claims; a row whose call has no wheel to hold it (a system tool such as pmset, a
header of the macOS SDK) prints "–" and what it was checked against by hand. Exit 1 when a claim is broken.
--torch checks the torch rows against another release (a pin bump's work list); --torch-table checks every row of
engine/machine/apple.MPS_MACOS_BY_TORCH against each torch release it covers (the wheel's macOS tag and its
"The MPS backend is supported on macOS N+").
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import struct
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = "macosx_14_0_arm64"  # pip takes any wheel whose tag is this macOS or older
PYTHON = "3.11"
TORCH_LIB = "torch/lib/libtorch_cpu.dylib"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


apple = _load("mpsstudio_apple_facts", ROOT / "mpsstudio" / "engine" / "machine" / "apple.py")  # no torch


# ---------------------------------------------------------------- reading wheels


def macho_symbols(data: bytes) -> list[str]:
    """The symbol names of a Mach-O image (64-bit, or the arm64 slice of a universal one): LC_SYMTAB's nlist_64
    entries and their string table (<mach-o/loader.h>, <mach-o/nlist.h>)."""
    if data[:4] == b"\xca\xfe\xba\xbe":  # a universal binary: big-endian fat_arch entries
        count = struct.unpack(">I", data[4:8])[0]
        for i in range(count):
            cputype, _, offset, size, _ = struct.unpack(">iiIII", data[8 + 20 * i:28 + 20 * i])
            if cputype == 0x0100000C:  # CPU_TYPE_ARM64
                return macho_symbols(data[offset:offset + size])
        raise ValueError("a universal binary without an arm64 slice")
    if data[:4] != b"\xcf\xfa\xed\xfe":
        raise ValueError("not a 64-bit Mach-O image")
    ncmds = struct.unpack("<I", data[16:20])[0]
    at = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack("<II", data[at:at + 8])
        if cmd == 0x2:  # LC_SYMTAB
            symoff, nsyms, stroff, strsize = struct.unpack("<IIII", data[at + 8:at + 24])
            table = data[stroff:stroff + strsize]
            names = []
            for i in range(nsyms):
                strx = struct.unpack("<I", data[symoff + 16 * i:symoff + 16 * i + 4])[0]
                end = table.find(b"\0", strx)
                names.append(table[strx:end].decode("latin-1"))
            return names
        at += size
    return []


def macho_function(data: bytes, name: str) -> bytes:
    """The machine code of the function `name` in a 64-bit Mach-O image (or a universal one's arm64 slice): from its
    symbol's address to the next symbol's, mapped to the file through its segment (LC_SEGMENT_64)."""
    if data[:4] == b"\xca\xfe\xba\xbe":
        count = struct.unpack(">I", data[4:8])[0]
        for i in range(count):
            cputype, _, offset, size, _ = struct.unpack(">iiIII", data[8 + 20 * i:28 + 20 * i])
            if cputype == 0x0100000C:
                return macho_function(data[offset:offset + size], name)
        raise ValueError("a universal binary without an arm64 slice")
    ncmds = struct.unpack("<I", data[16:20])[0]
    at, segments, addresses, wanted = 32, [], [], None
    for _ in range(ncmds):
        cmd, size = struct.unpack("<II", data[at:at + 8])
        if cmd == 0x19:  # LC_SEGMENT_64: segname, vmaddr, vmsize, fileoff, filesize
            vmaddr, vmsize, fileoff, filesize = struct.unpack("<QQQQ", data[at + 24:at + 56])
            segments.append((vmaddr, vmsize, fileoff))
        elif cmd == 0x2:  # LC_SYMTAB
            symoff, nsyms, stroff, _ = struct.unpack("<IIII", data[at + 8:at + 24])
            for i in range(nsyms):
                strx, ntype, _, _, value = struct.unpack("<IBBHQ", data[symoff + 16 * i:symoff + 16 * i + 16])
                if ntype & 0x0E != 0x0E or not value:  # N_SECT: defined in a section
                    continue
                addresses.append(value)
                if wanted is None:
                    end = data.find(b"\0", stroff + strx)
                    if data[stroff + strx:end].decode("latin-1") == name:
                        wanted = value
        at += size
    if wanted is None:
        raise KeyError(name)
    following = min((a for a in addresses if a > wanted), default=wanted + 4096)
    for vmaddr, vmsize, fileoff in segments:
        if vmaddr <= wanted < vmaddr + vmsize:
            start = wanted - vmaddr + fileoff
            return data[start:start + min(following - wanted, 65536)]
    raise KeyError(name)


def arm64_words(code: bytes) -> set[int]:
    """The 32-bit instruction words of arm64 code (little-endian)."""
    return {struct.unpack("<I", code[i:i + 4])[0] for i in range(0, len(code) - 3, 4)}


CMP_W8_0 = 0x7100C11F  # arm64 `cmp w8, #48`: compares a byte with the character '0'


class Package:
    """One downloaded distribution: its file name and its members, read on demand."""

    def __init__(self, path: Path):
        self.path = path
        self._zip = zipfile.ZipFile(path) if path.suffix == ".whl" else None
        self._tar = tarfile.open(path) if path.name.endswith(".tar.gz") else None
        self._cache: dict[str, bytes] = {}
        self._symbols: dict[str, str] = {}

    def read(self, member: str) -> bytes:
        if member not in self._cache:
            if self._zip is not None:
                self._cache[member] = self._zip.read(member)
            else:
                names = {n.split("/", 1)[-1]: n for n in self._tar.getnames()}  # under "<name>-<version>/"
                self._cache[member] = self._tar.extractfile(names[member]).read()
        return self._cache[member]

    def symbols(self, member: str) -> str:
        if member not in self._symbols:
            self._symbols[member] = "\n".join(macho_symbols(self.read(member)))
        return self._symbols[member]

    def tag(self) -> str:
        return self.path.name[:-len(".whl")].split("-")[-1]


def fetch(spec: str, cache: Path, *, sdist: bool = False) -> Package:
    """`spec` ("torch==2.14.1") downloaded for macOS arm64 by pip into `cache` (kept there for the next check).
    The machine's own pip constraints are set aside (PIP_CONSTRAINT=/dev/null): a cap on torch is not this check's."""
    cache.mkdir(parents=True, exist_ok=True)
    name, _, version = spec.partition("==")
    norm = re.sub(r"[-_.]+", "_", name).lower()
    def found():
        wanted = version.replace("*", "")
        hits = [p for p in cache.iterdir() if re.sub(r"[-_.]+", "_", p.name.split("-")[0]).lower() == norm
                and p.name.split("-")[1].startswith(wanted) and (p.name.endswith(".tar.gz") if sdist
                                                                 else p.name.endswith(".whl"))]
        return sorted(hits)[-1] if hits else None
    if found() is None:
        how = (["--no-binary", ":all:"] if sdist else
               ["--only-binary", ":all:", "--platform", PLATFORM, "--python-version", PYTHON])
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache), *how,
                               spec], capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": os.devnull})
        if done.returncode != 0 or found() is None:
            raise RuntimeError(f"pip could not download {spec} for macOS arm64: {done.stderr.strip()[-300:]}")
    return Package(found())


# ---------------------------------------------------------------- claims


@dataclass
class Claim:
    """One thing the ledger says about a distribution: `kind` is "source" (a member's text holds `text`, or matches it
    as a regex with `regex`), "pycode" (a Python member's code holds it, its comments left out: a claim about what
    the code does, not what a comment says), "string" (a library's bytes hold it), "symbol" (a library's symbol table has a name
    holding it), "code" (the arm64 code of the function named `text` holds the instruction word `word`) or "tag"
    (the wheel's platform tag is it)."""

    package: str  # "torch", "coremltools", ... or "psutil-sdist"
    kind: str
    member: str
    text: str
    regex: bool = False
    word: int = 0

    def holds(self, pkg: Package) -> tuple[bool, str]:
        if self.kind == "tag":
            return pkg.tag() == self.text, pkg.tag()
        if self.kind == "code":
            try:
                code = macho_function(pkg.read(self.member), self.text)
            except KeyError:
                return False, f"{self.member} has no function {self.text}"
            return self.word in arm64_words(code), ""
        try:
            if self.kind == "symbol":
                hay = pkg.symbols(self.member)
            elif self.kind == "pycode":
                hay = without_comments(pkg.read(self.member).decode("utf-8", "replace"))
            else:
                hay = pkg.read(self.member).decode("utf-8", "replace")
        except KeyError:
            return False, f"{self.member} is not in {pkg.path.name}"
        if self.regex:
            return re.search(self.text, hay) is not None, ""
        return self.text in hay, ""

    def words(self) -> str:
        if self.kind == "code":
            return f"{self.package}: {self.member}'s {self.text} holds the instruction {self.word:#010x}"
        what = {"source": "holds", "pycode": "has in its code", "string": "has the string", "symbol": "has a symbol with",
                "tag": "is tagged"}[self.kind]
        where = self.member if self.kind != "tag" else "the wheel"
        return f"{self.package}: {where} {what} {self.text!r}"


def without_comments(source: str) -> str:
    """Python source with its comments removed (tokenize's COMMENT tokens; docstrings and other strings stay: they are
    values the code holds)."""
    import io
    import tokenize

    lines = source.splitlines(keepends=True)
    cut: dict[int, int] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                cut[token.start[0]] = token.start[1]
    except (tokenize.TokenError, SyntaxError):
        return source
    return "".join(line[:cut[i]].rstrip() + "\n" if i in cut else line for i, line in enumerate(lines, start=1))


def _code(package, member, text):
    return Claim(package, "pycode", member, text)


def _src(package, member, text, regex=False):
    return Claim(package, "source", member, text, regex)


def _lib(text):
    return Claim("torch", "string", TORCH_LIB, text)


def _sym(text):
    return Claim("torch", "symbol", TORCH_LIB, text)


TORCH_MPS = "torch/mps/__init__.py"
EVENT_H = "torch/include/ATen/mps/MPSEvent.h"
ALLOC_H = "torch/include/ATen/mps/MPSAllocator.h"
CT = "coremltools"
MLX_CORE = "mlx/core/__init__.pyi"  # the macOS wheel's stubs: the API its compiled core.cpython-311-darwin.so has
MLX_LIB = "mlx/lib/libmlx.dylib"
KEYRING_MAC, KEYRING_API = "keyring/backends/macOS/__init__.py", "keyring/backends/macOS/api.py"


def _min_macos_claims(torch_version: str) -> list[Claim]:
    """The macOS the table says this torch's Apple GPU needs, as its library says it, and its wheel's tag."""
    needs = apple.macos_text(apple.mps_min_macos(torch_version))
    tag = next(row[2] for row in reversed(apple.MPS_MACOS_BY_TORCH)
               if row[0] <= apple.torch_release(torch_version))
    return [Claim("torch", "string", TORCH_LIB, f"The MPS backend is supported on [Mm]acOS {re.escape(needs)}\\+",
                  regex=True),
            Claim("torch", "tag", "", f"macosx_{tag[0]}_{tag[1]}_arm64")]


def rows(torch_version: str) -> list[tuple[str, str, list[Claim] | str]]:
    """(id, call, claims, or the words of a row no wheel can check) for every ledger row."""
    return [
        ("availability", "torch.backends.mps.is_built(), is_available()",
         [_src("torch", "torch/backends/mps/__init__.py", "@_lru_cache\ndef is_available() -> bool:")]),
        ("script-visibility", "torch.backends.mps.is_available(), torch.mps.is_available(), device_count(); "
         "torch.accelerator.current_accelerator(), is_available(), device_count()",
         [_src("torch", TORCH_MPS, "def is_available() -> bool:\n    return device_count() > 0"),
          _src("torch", TORCH_MPS, "def device_count() -> int:"),
          _src("torch", "torch/accelerator/__init__.py", "def current_accelerator(check_available: bool = False)"),
          _src("torch", "torch/accelerator/__init__.py", "mod = torch.get_device_module(acc)\n    return "
               "mod.is_available()")]),
        ("minimum-macos", "the minimum macOS of the loaded torch", _min_macos_claims(torch_version)),
        ("convert", "coremltools.convert(ExportedProgram, ..., skip_model_load=True)",
         [_src(CT, "coremltools/converters/_converters_entry.py", "skip_model_load=False,\n    compute_units="
               "_ComputeUnit.ALL,"),
          _src(CT, "coremltools/converters/_converters_entry.py", "Provided Dialect: {model.dialect}")]),
        ("predict", "coremltools.models.MLModel(path, compute_units=...).predict(...)",
         [_src(CT, "coremltools/models/model.py", "Model prediction is only supported on macOS version 10.13")]),
        ("compile-plan", "compile_model(path, destination); MLComputePlan.load_from_path(...)",
         [_src(CT, "coremltools/models/utils.py", "if destination_path is None:\n        return "
               "original_compiled_model_path"),
          _src(CT, "coremltools/models/compute_plan.py", "def load_from_path("),
          _src(CT, "coremltools/models/compute_device.py", "class MLNeuralEngineComputeDevice")]),
        ("synchronize", "torch.mps.synchronize()", [_src("torch", TORCH_MPS, "torch._C._mps_deviceSynchronize()")]),
        ("memory", "torch.mps.current_allocated_memory(), driver_allocated_memory(), recommended_max_memory()",
         [_src("torch", TORCH_MPS, "torch._C._mps_currentAllocatedMemory()"),
          _src("torch", TORCH_MPS, "torch._C._mps_driverAllocatedMemory()"),
          _src("torch", TORCH_MPS, "torch._C._mps_recommendedMaxMemory()")]),
        ("empty-cache", "torch.mps.empty_cache()", [_src("torch", TORCH_MPS, "torch._C._mps_emptyCache()")]),
        ("events", "torch.mps.event.Event(enable_timing=True): record(), elapsed_time(end)",
         [_src("torch", "torch/mps/event.py", "torch._C._mps_elapsedTimeOfEvents(self.__eventId, "
               "end_event.__eventId)"), *_event_claims(torch_version),
          _lib("Events were not created with argument 'enable_timing=True'")]),
        ("footprint", "proc_pid_rusage(pid, RUSAGE_INFO_V0, &info), ri_phys_footprint",
         "<libproc.h>, <sys/resource.h> of the macOS SDK (no wheel holds them): the footprint at byte 72"),
        ("float64", "float64 / complex128 on the device, and before an MPS run",
         [_lib("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. Please "
               "use float32 instead."),
          _lib(" to the MPS backend but it does not have support for that dtype.")]),
        ("memory-fraction", "torch.mps.set_per_process_memory_fraction(f)",
         [_code("torch", TORCH_MPS, 'if fraction < 0 or fraction > 2:\n        raise ValueError(f"Invalid fraction '
                'value: {fraction}. Allowed range: 0~2")\n\n    torch._C._mps_setMemoryFraction(fraction)'),
          _src("torch", ALLOC_H, "return [m_device currentAllocatedSize];"),
          _src("torch", ALLOC_H, "constexpr static double default_high_watermark_ratio = 1.7;"),
          _src("torch", ALLOC_H, "static const size_t kLargeHeap = MB(32);"),
          _sym("MPSHeapAllocatorImpl21setHighWatermarkRatio"), _sym("MPSHeapAllocatorImpl22release_cached_buffers"),
          _lib("MPS backend out of memory (MPS allocated: "), _lib("other allocations: ")]),
        ("memory-peak", "torch.accelerator.max_memory_allocated(0), reset_peak_memory_stats(0)",
         [_code("torch", "torch/accelerator/memory.py", 'return memory_stats(device_index).get("allocated_bytes.all.'
                'peak", 0)'),
          _code("torch", "torch/accelerator/memory.py", "if not torch._C._accelerator_isAllocatorInitialized():\n"
                "        return OrderedDict()"),
          _code("torch", "torch/accelerator/memory.py", "return torch._C._accelerator_resetPeakStats(device_index)"),
          _src("torch", ALLOC_H, "c10::CachingDeviceAllocator::DeviceStats getDeviceStats();"),
          _sym("MPSHeapAllocatorImpl14getDeviceStats"), _sym("MPSHeapAllocatorImpl14resetPeakStats")]),
        ("autocast", 'torch.autocast("mps", float16 / bfloat16)',
         [_sym("TORCH_LIBRARY_IMPL_init_aten_AutocastMPS")]),
        ("grad-scaler", 'torch.amp.GradScaler("mps")',
         [_src("torch", "torch/amp/grad_scaler.py", 'torch.device("mps:0")')]),
        ("fallback", "dispatcher: the boxed MPS fallback (mps_fallback / mps_error_fallback)",
         [_sym("mps_error_fallback"), _sym("L12mps_fallback"),
          _lib("' is not currently implemented "), _lib("aten/src/ATen/mps/MPSFallback.mm")]),
        ("fallback-variable", "PYTORCH_ENABLE_MPS_FALLBACK",
         [_lib("PYTORCH_ENABLE_MPS_FALLBACK"), *_fallback_parse(torch_version)]),
        ("mps-variables", "the MPS environment variables torch reads",
         [Claim("torch", "string", TORCH_LIB, name) for name in _torch_mps_variables()]),
        ("compile", "torch.compile on MPS",
         [_code("torch", "torch/_inductor/codegen/mps.py", "class MetalKernel(SIMDKernel):"),
          _code("torch", "torch/_inductor/runtime/runtime_utils.py", '"#include <c10/metal/')]),
        ("zeus", "zeus_apple_silicon.AppleEnergyMonitor().get_cumulative_energy()",
         [Claim("zeus-apple-silicon", "string", "zeus_apple_silicon/zeus_ext.cpython-311-darwin.so", field)
          for field in ("AppleEnergyMonitor", "get_cumulative_energy", "gpu_mj", "cpu_total_mj", "ane_mj", "dram_mj")]),
        ("ioreg", 'ioreg -r -d 1 -w 0 -c IOAccelerator ("Device Utilization %"); ioreg -rc AGXAccelerator',
         "ioreg(8), on a Mac (no wheel holds it)"),
        ("sysctl", "sysctl machdep.cpu.brand_string, hw.memsize, sysctl.proc_translated, kern.osversion",
         [_src("psutil-sdist", "psutil/arch/osx/mem.c", 'sysctlbyname("hw.memsize")')]),
        ("pmset", "pmset -g (Low Power Mode); pmset -g therm on an Intel Mac",
         "pmset(1), on a Mac (no wheel holds it): CPU_Speed_Limit is an Intel Mac's"),
        ("thermal-state", "[[NSProcessInfo processInfo] thermalState]",
         [_src("pyobjc-framework-Cocoa", "Foundation/_metadata.py", f"NSProcessInfoThermalState{name}@{value}")
          for name, value in (("Nominal", 0), ("Fair", 1), ("Serious", 2), ("Critical", 3))]),
        ("battery", "psutil.sensors_battery()", [_src("psutil", "psutil/_psosx.py", "def sensors_battery():")]),
        ("swap", "psutil.swap_memory() on macOS",
         [_src("psutil-sdist", "psutil/arch/osx/mem.c", "mib[1] = VM_SWAPUSAGE;"),
          _src("psutil-sdist", "psutil/arch/osx/mem.c", "(unsigned long long)vmstat.pageouts * pagesize")]),
        ("mac-ver", "platform.mac_ver()",
         [Claim("python", "source", "platform.py", "/System/Library/CoreServices/SystemVersion.plist")]),
        ("info-plist", "Info.plist keys (LSMinimumSystemVersion, ...)",
         "Apple's Information Property List reference (no wheel holds it); LSMinimumSystemVersion is the row "
         "minimum-macos of the pinned torch"),
        ("mlx-available", "import mlx.core; mx.metal.is_available(); mx.cuda.is_available()",
         [_src("mlx", "mlx/core/metal.pyi", "def is_available() -> bool:"),
          _src("mlx", f"mlx-{pinned('mlx')}.dist-info/METADATA",
               f'Requires-Dist: mlx-metal=={pinned("mlx")}; platform_system == "Darwin"'),
          _src("mlx", "mlx/core/cuda.pyi", "def is_available() -> bool:")]),
        ("mlx-synchronize", "mx.synchronize()",
         [_src("mlx", MLX_CORE, "def synchronize(stream: Stream | ThreadLocalStream | Device | DeviceType | None = "
               "None) -> None:")]),
        ("mlx-memory", "mx.get_active_memory(), get_peak_memory(), get_cache_memory(), reset_peak_memory(), "
         "clear_cache()",
         [_src("mlx", MLX_CORE, f"def {name}() -> {kind}:") for name, kind in (
             ("get_active_memory", "int"), ("get_peak_memory", "int"), ("get_cache_memory", "int"),
             ("reset_peak_memory", "None"), ("clear_cache", "None"))]),
        ("mlx-tf32", "MLX_ENABLE_TF32; mx.device_info(mx.gpu)['architecture']",
         [Claim("mlx-metal", "string", MLX_LIB, "MLX_ENABLE_TF32"),
          Claim("mlx-metal", "string", MLX_LIB, "MLX_METAL_GPU_ARCH"),
          Claim("mlx-metal", "string", MLX_LIB, "architecture")]),
        ("mlx-device-info", "mx.device_info(mx.gpu)",
         [_src("mlx", MLX_CORE, "def device_info(d: None | Device | DeviceType = None) -> dict[str, str | int]:"),
          Claim("mlx-metal", "string", MLX_LIB, "device_name")]),
        ("mlx-step", "nn.value_and_grad, optimizer.update, mx.eval(loss, model.state, optimizer.state), "
         "mx.compile(step, inputs=state, outputs=state); Adam/AdamW(bias_correction=True); Dropout's _p_1",
         [_src("mlx", MLX_CORE, "def compile(fun: Callable[P, R], inputs: object | None = None, outputs: object | "
               "None = None, shapeless: bool = False) -> Callable[P, R]:"),
          _src("mlx", MLX_CORE, "def eval(*args) -> None:"),
          _src("mlx", "mlx/nn/utils.py", "def value_and_grad(model: Module, fn: Callable):"),
          _src("mlx", "mlx/optimizers/optimizers.py", "bias_correction: bool = False,"),
          _code("mlx", "mlx/optimizers/optimizers.py", "def apply_gradients(self, gradients: dict, parameters: dict):"),
          _code("mlx", "mlx/optimizers/optimizers.py", "eps: float = 1e-8,"),
          _src("mlx", "mlx/nn/layers/dropout.py", "if self._p_1 == 1 or not self.training:")]),
        ("mlx-metal-library", "MLX's library and Metal kernels (the app collects them)",
         [Claim("mlx-metal", "string", MLX_LIB, "mlx.metallib"),
          Claim("mlx-metal", "tag", "", "macosx_14_0_arm64")]),
        ("mlx-lm-load", "mlx_lm.utils.load_model(path, strict=True, model_config=, get_model_classes=, "
         "trust_remote_code=False); MODEL_REMAPPING; mlx_lm/models/<type>.py",
         [_src("mlx-lm", "mlx_lm/utils.py", "get_model_classes: Callable[[dict], Tuple[Type[nn.Module], Type]] = "
               "_get_classes,"),
          _src("mlx-lm", "mlx_lm/utils.py", "trust_remote_code: bool = False,"),
          _src("mlx-lm", "mlx_lm/utils.py", "Pass trust_remote_code=True if you"),
          _src("mlx-lm", "mlx_lm/utils.py", "MODEL_REMAPPING = {"),
          _src("mlx-lm", "mlx_lm/utils.py", 'importlib.import_module(f"mlx_lm.models.{model_type}")'),
          _src("mlx-lm", "mlx_lm/models/gpt2.py", "    n_ctx: int"),
          _src("mlx-lm", "mlx_lm/models/gpt2.py", 'if f"h.{i}.attn.c_attn.weight" in weights:')]),
        ("mlx-lm-lora", "mlx_lm.tuner.utils.linear_to_lora_layers(model, n, {rank, scale, dropout, keys}); "
         "LoRALinear's lora_a (in, r), lora_b (r, out)",
         [_src("mlx-lm", "mlx_lm/tuner/utils.py", "def linear_to_lora_layers("),
          _src("mlx-lm", "mlx_lm/tuner/utils.py", "for l in model.layers[-max(num_layers, 0) :]:"),
          _src("mlx-lm", "mlx_lm/tuner/utils.py", 'scale=config["scale"],'),
          _src("mlx-lm", "mlx_lm/tuner/utils.py", 'dropout=config["dropout"],'),
          _src("mlx-lm", "mlx_lm/tuner/utils.py", 'if (keys := config.get("keys", None)) is None:'),
          _src("mlx-lm", "mlx_lm/tuner/lora.py", "shape=(input_dims, r),"),
          _src("mlx-lm", "mlx_lm/tuner/lora.py", "self.lora_b = mx.zeros(shape=(r, output_dims))"),
          _src("mlx-lm", "mlx_lm/tuner/lora.py", "z = (self.dropout(x) @ self.lora_a) @ self.lora_b"),
          _src("mlx-lm", "mlx_lm/tuner/lora.py", "return y + (self.scale * z).astype(x.dtype)")]),
        ("mlx-lm-quantize", "mlx.nn.quantize(model, group_size=64, bits=, class_predicate=) as "
         "mlx_lm.utils.quantize_model calls it; LoRALinear over a QuantizedLinear",
         [_src("mlx", "mlx/nn/layers/quantized.py", 'class_predicate = class_predicate or (lambda _, m: hasattr(m, '
               '"to_quantized"))'),
          _src("mlx", "mlx/nn/layers/quantized.py", "leaves = model.leaf_modules()"),
          _src("mlx", "mlx/nn/layers/quantized.py", "# Freeze this model's parameters"),
          _src("mlx-lm", "mlx_lm/utils.py", '"affine": (64, 4),'),
          _src("mlx-lm", "mlx_lm/utils.py", "if module.weight.shape[-1] % group_size != 0:"),
          _src("mlx-lm", "mlx_lm/tuner/lora.py", "if isinstance(linear, nn.QuantizedLinear):"),
          _src("mlx-lm", "mlx_lm/tuner/lora.py", "input_dims = input_dims * 32 // linear.bits")]),
        ("mlx-lm-generate", "mlx_lm.generate.generate_step(prompt, model, stream, max_tokens=) with greedy_sampler; "
         "Module.set_dtype",
         [_src("mlx-lm", "mlx_lm/generate.py", "stream: mx.Stream | mx.ThreadLocalStream = generation_stream,"),
          _src("mlx-lm", "mlx_lm/generate.py", "prefill_step_size: int = 2048,"),
          _src("mlx-lm", "mlx_lm/generate.py", "sampler = sampler or greedy_sampler"),
          _src("mlx-lm", "mlx_lm/generate.py", "mx.async_eval(next_y, next_logprobs)"),
          _src("mlx-lm", "mlx_lm/generate.py", "yield y.item(), logprobs"),
          _src("mlx-lm", "mlx_lm/sample_utils.py", "return mx.argmax(logprobs, axis=-1)"),
          _src("mlx", "mlx/nn/layers/base.py", "def set_dtype(")]),
        ("keychain", "keyring.backends.macOS.Keyring().get_password / set_password / delete_password(service, "
         "account) over Security.framework's SecItemCopyMatching / SecItemAdd / SecItemDelete",
         [_code("keyring", KEYRING_MAC, "except api.NotFound:\n            pass"),
          _code("keyring", KEYRING_MAC, "except api.KeychainDenied as e:\n            raise KeyringLocked(f\"Can't get "
                "password from keychain: {e}\") from e"),
          _code("keyring", KEYRING_MAC, "except api.Error as e:\n            raise KeyringError(f\"Can't get password "
                "from keychain: {e}\") from e"),
          _code("keyring", KEYRING_MAC, "return api.delete_generic_password(self.keychain, service, username)\n"
                "        except api.Error as e:\n            raise PasswordDeleteError("),
          _code("keyring", KEYRING_MAC, "if platform.system() != 'Darwin':"),
          _code("keyring", KEYRING_API, "item_not_found = -25300\n    keychain_denied = -128\n    sec_auth_failed = "
                "-25293"),
          _code("keyring", KEYRING_API, "class NotFound(Error):"),
          _code("keyring", KEYRING_API, "kSecClass=k_('kSecClassGenericPassword'),"),
          _code("keyring", KEYRING_API, "kSecAttrService=service,\n        kSecAttrAccount=username,"),
          _src("keyring", KEYRING_API, "executable is signed with codesign util")]),
        ("spawn", "spawn, multiprocessing.freeze_support(); a script's own start method",
         [Claim("python", "source", "multiprocessing/context.py", "bpo-33725: running arbitrary code after fork() "
                "is no longer reliable"),
          Claim("python", "source", "multiprocessing/spawn.py", "start_method=get_start_method()")]),
    ]


def _event_claims(torch_version: str) -> list[Claim]:
    """What an MPS event's time is, as engine/machine/apple.mps_event_words says it for this torch: from 2.15 the
    GPU's completion time (no one-shot CPU-sync flag: no pytorch#162872 hang); before, the host's clock in Metal's
    completion callbacks, and a flag `synchronize()` consumes."""
    if apple.mps_events_gpu_times(torch_version):
        return [_src("torch", EVENT_H, "Enables measuring the GPU completion time of this event."),
                _src("torch", EVENT_H, "double waitForTiming();"),
                _src("torch", EVENT_H, "double m_completion_time = 0.0;")]
    return [_src("torch", EVENT_H, "bool m_cpu_sync_completed = false;"),
            _src("torch", EVENT_H, "void waitForCpuSync();"),
            _src("torch", EVENT_H, "return clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW);"),
            _lib(" was not recorded after start event ")]


def _fallback_parse(torch_version: str) -> list[Claim]:
    """How torch reads PYTORCH_ENABLE_MPS_FALLBACK, as engine/machine/apple.fallback_enabled says it does: from 2.8,
    the MPS init compares the value with the one character "0" (unset or "0": off; anything else: on; nothing
    aborts); before, std::stoi (a value it cannot read aborts `import torch`)."""
    if apple.torch_release(torch_version) < apple.FALLBACK_STRING_FROM:
        return []
    return [Claim("torch", "code", TORCH_LIB, "__ZN2atL31TORCH_LIBRARY_IMPL_init___MPS_1ERN5torch7LibraryE",
                  word=CMP_W8_0)]


def _torch_mps_variables() -> tuple[str, ...]:
    """The MPS variables the app records with a run (engine/machine/environment.MPS_ENV_VARS), read from its source
    (torch-free), less the one torch 2.15 added."""
    text = (ROOT / "mpsstudio" / "engine" / "machine" / "environment.py").read_text(encoding="utf-8")
    block = text[text.index("MPS_ENV_VARS = ("):]
    block = block[:block.index(")")]
    return tuple(n for n in re.findall(r'"([A-Z_]+)"', block) if n != "PYTORCH_MPS_METAL_VERSION")


def _lib_variables(pkg: Package) -> set[str]:
    """Every PYTORCH_*MPS* name in torch's library."""
    return {v.decode() for v in re.findall(rb"PYTORCH_(?:MPS|ENABLE_MPS|DEBUG_MPS)[A-Z_]+", pkg.read(TORCH_LIB))}


class Stdlib:
    """The running Python's standard library, as a Package (the macOS Python's is the same source)."""

    path = Path(os.__file__).parent

    def read(self, member: str) -> bytes:
        try:
            return (self.path / member).read_bytes()
        except FileNotFoundError:
            raise KeyError(member) from None


def pinned(name: str) -> str:
    text = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line.lower().startswith(f"{name.lower()}=="):
            return line.split("==", 1)[1].strip()
    raise SystemExit(f"constraints.txt pins no {name}")


def check(torch_version: str, cache: Path, only_torch: bool = False) -> int:
    """Print every row and its claims against the wheels; the count of broken claims."""
    packages = {
        "torch": lambda: fetch(f"torch=={torch_version}", cache),
        "coremltools": lambda: fetch(f"coremltools=={pinned('coremltools')}", cache),
        "zeus-apple-silicon": lambda: fetch(f"zeus-apple-silicon=={pinned('zeus-apple-silicon')}", cache),
        "psutil": lambda: fetch(f"psutil=={pinned('psutil')}", cache),
        "psutil-sdist": lambda: fetch(f"psutil=={pinned('psutil')}", cache, sdist=True),
        "pyobjc-framework-Cocoa": lambda: fetch("pyobjc-framework-Cocoa==13.0", cache),
        "mlx": lambda: fetch(f"mlx=={pinned('mlx')}", cache),
        "mlx-metal": lambda: fetch(f"mlx-metal=={pinned('mlx-metal')}", cache),
        "mlx-lm": lambda: fetch(f"mlx-lm=={pinned('mlx-lm')}", cache),
        "keyring": lambda: fetch(f"keyring=={pinned('keyring')}", cache),
        "python": Stdlib,
    }
    loaded: dict = {}
    broken = 0
    for row_id, call, claims in rows(torch_version):
        if only_torch and (isinstance(claims, str) or all(c.package != "torch" for c in claims)):
            continue
        if isinstance(claims, str):
            print(f"–  {row_id}: {call}\n     not checked by machine: {claims}")
            continue
        results = []
        for claim in claims:
            if claim.package not in loaded:
                loaded[claim.package] = packages[claim.package]()
            ok, seen = claim.holds(loaded[claim.package])
            results.append((ok, claim.words(), seen))
        if row_id == "mps-variables":  # and no variable torch reads is missing from the app's list
            unknown = sorted(_lib_variables(loaded["torch"]) - set(_torch_mps_variables())
                             - {"PYTORCH_MPS_METAL_VERSION"})
            results.append((not unknown, f"torch: {TORCH_LIB} names no other PYTORCH_*MPS* variable",
                            f"also {', '.join(unknown)}" if unknown else ""))
        bad = [r for r in results if not r[0]]
        broken += len(bad)
        print(f"{'✗' if bad else '✓'}  {row_id}: {call}")
        for ok, words, seen in results:
            print(f"     {'✓' if ok else '✗'} {words}" + (f" (found {seen})" if seen and not ok else ""))
    return broken


def check_table(cache: Path) -> int:
    """Each torch release the table covers (its rows' minor releases, newest patch each): its wheel's tag and the
    macOS its library names, against the table."""
    broken = 0
    last = apple.MPS_MACOS_BY_TORCH[-1][0]
    major = last[0]
    for minor in range(apple.MPS_MACOS_BY_TORCH[0][0][1], last[1] + 1):
        version = f"{major}.{minor}.*"
        pkg = fetch(f"torch=={version}", cache)
        found = pkg.path.name.split("-")[1]
        data = pkg.read(TORCH_LIB)
        said = re.search(rb"The MPS backend is supported on [Mm]acOS (\d+)\.(\d+)\+", data)
        needs = apple.mps_min_macos(found)
        tag = next(row[2] for row in reversed(apple.MPS_MACOS_BY_TORCH) if row[0] <= apple.torch_release(found))
        ok_needs = said is not None and (int(said.group(1)), int(said.group(2))) == needs
        ok_tag = pkg.tag() == f"macosx_{tag[0]}_{tag[1]}_arm64"
        broken += (not ok_needs) + (not ok_tag)
        words = said.group(0).decode() if said else "no such string"
        print(f"{'✓' if ok_needs and ok_tag else '✗'}  torch {found}: the table says macOS {apple.macos_text(needs)} "
              f"(wheels from macOS {apple.macos_text(tag)}); the wheel is {pkg.tag()} and says \"{words}\"")
        pkg._cache.clear()
    return broken


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", help="check the torch rows against this torch release instead of the pinned one")
    parser.add_argument("--torch-table", action="store_true",
                        help="check engine/machine/apple.MPS_MACOS_BY_TORCH against every torch release it covers")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("MPSSTUDIO_LEDGER_CACHE",
                                                                         ROOT / "build" / "apple-ledger")),
                        help="where the downloaded wheels are kept (default build/apple-ledger)")
    args = parser.parse_args(argv)
    version = args.torch or pinned("torch")
    try:
        if args.torch_table:
            broken = check_table(args.cache)
        else:
            print(f"Apple API ledger against the macOS arm64 wheels: torch {version}"
                  + ("" if args.torch else f", coremltools {pinned('coremltools')}, zeus-apple-silicon "
                     f"{pinned('zeus-apple-silicon')}, psutil {pinned('psutil')}"))
            broken = check(version, args.cache, only_torch=bool(args.torch))
    except RuntimeError as exc:
        print(f"apple_ledger: {exc}", file=sys.stderr)
        return 2
    print(f"{broken} broken claim{'s' if broken != 1 else ''}." if broken else "Every claim holds.")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
