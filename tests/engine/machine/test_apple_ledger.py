"""The Apple ledger a machine checks (benchmarks/apple_ledger.py, `make apple-check`): its table and its claims are
the same rows, and its readers find what a wheel holds and miss what it does not (tiny wheels written here; the real
ones are checked by `make apple-check`, recorded in docs/benchmarks.md)."""

from __future__ import annotations

import importlib.util
import re
import struct
import sys
import zipfile
from pathlib import Path

import pytest
from tests.support.paths import ROOT



def _ledger():
    spec = importlib.util.spec_from_file_location("apple_ledger", ROOT / "benchmarks" / "apple_ledger.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["apple_ledger"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ledger = _ledger()


def test_every_row_of_the_table_has_its_claim_and_every_claim_its_row():
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("## Apple API ledger"):]
    table = table[:table.index("\n\n", table.index("| id |"))]
    ids = re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.M)
    assert ids == [row_id for row_id, _, _ in ledger.rows("2.14.1")]
    for row_id, _, claims in ledger.rows("2.14.1"):  # a row no wheel holds says what it was checked against
        assert claims if isinstance(claims, list) else "no wheel" in claims, row_id


def _macho(symbols: list[str]) -> bytes:
    """A 64-bit Mach-O image with one LC_SYMTAB, as <mach-o/loader.h> lays it out."""
    strtab = b"\0" + b"".join(s.encode() + b"\0" for s in symbols)
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, 0x0100000C, 0, 6, 1, 24, 0, 0)
    symoff = len(header) + 24
    nlist = b""
    at = 1
    for s in symbols:
        nlist += struct.pack("<IBBHQ", at, 0x0F, 1, 0, 0)
        at += len(s) + 1
    stroff = symoff + len(nlist)
    return header + struct.pack("<IIIIII", 0x2, 24, symoff, len(symbols), stroff, len(strtab)) + nlist + strtab


def test_symbols_are_read_from_a_mach_o_image_and_its_universal_wrapper():
    image = _macho(["__ZN2atL18mps_error_fallbackERKN3c10", "_main"])
    assert ledger.macho_symbols(image) == ["__ZN2atL18mps_error_fallbackERKN3c10", "_main"]
    fat = struct.pack(">II", 0xCAFEBABE, 1) + struct.pack(">iiIII", 0x0100000C, 0, 28, len(image), 0) + image
    assert ledger.macho_symbols(fat) == ledger.macho_symbols(image)
    with pytest.raises(ValueError, match="not a 64-bit Mach-O"):
        ledger.macho_symbols(b"\x7fELF" + bytes(60))


def _wheel(folder: Path, name: str, files: dict[str, bytes]) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as z:
        for member, data in files.items():
            z.writestr(member, data)
    return path


def test_a_claim_holds_where_the_wheel_has_it_and_breaks_where_it_does_not(tmp_path):
    lib = b"junk The MPS backend is supported on macOS 14.0+. junk" + _macho(["L12mps_fallback"])
    pkg = ledger.Package(_wheel(tmp_path, "torch-2.14.1-cp311-cp311-macosx_14_0_arm64.whl", {
        ledger.TORCH_LIB: lib, "torch/mps/event.py": b"torch._C._mps_elapsedTimeOfEvents(a, b)"}))
    assert ledger.Claim("torch", "source", "torch/mps/event.py", "_mps_elapsedTimeOfEvents").holds(pkg)[0]
    assert not ledger.Claim("torch", "source", "torch/mps/event.py", "_mps_synchronizeEvent").holds(pkg)[0]
    assert ledger.Claim("torch", "tag", "", "macosx_14_0_arm64").holds(pkg) == (True, "macosx_14_0_arm64")
    assert not ledger.Claim("torch", "source", "torch/mps/missing.py", "x").holds(pkg)[0]
    for claim in ledger._min_macos_claims("2.14.1"):
        assert claim.holds(pkg)[0], claim.words()
    assert not all(c.holds(pkg)[0] for c in ledger._min_macos_claims("2.15.0"))  # 2.15 says macOS 15.0


def test_a_code_claim_breaks_where_only_a_comment_says_it(tmp_path):
    """The compile row's claims are about code: the same words in a comment do not hold them (the row once matched
    inductor's "Just an early prototype" comment)."""
    [compile_row] = [claims for row_id, _, claims in ledger.rows("2.14.1") if row_id == "compile"]
    mps_claim = next(c for c in compile_row if c.member == "torch/_inductor/codegen/mps.py")
    assert mps_claim.kind == "pycode"
    code = b"class SIMDKernel:\n    pass\n\n\nclass MetalKernel(SIMDKernel):\n    pass\n"
    comment = b"# class MetalKernel(SIMDKernel): was here\nclass Other:\n    pass\n"
    for name, body, holds in (("with", code, True), ("without", comment, False)):
        folder = tmp_path / name
        folder.mkdir()
        pkg = ledger.Package(_wheel(folder, "torch-2.14.1-cp311-cp311-macosx_14_0_arm64.whl",
                                    {mps_claim.member: body}))
        assert mps_claim.holds(pkg)[0] is holds
    assert ledger.without_comments("x = '# kept'  # cut\n") == "x = '# kept'\n"


def test_the_torch_table_is_checked_against_each_release_s_wheel(tmp_path, capsys):
    """Every release the table covers: its tag and the macOS its library names. A wrong row is a broken claim."""
    def release_wheels(says_215: str):
        for minor in range(6, 16):
            needs = ledger.apple.mps_min_macos(f"2.{minor}.0")
            tag = next(r[2] for r in reversed(ledger.apple.MPS_MACOS_BY_TORCH) if r[0] <= (2, minor))
            said = says_215 if minor == 15 else f"macOS {needs[0]}.{needs[1]}"
            _wheel(tmp_path, f"torch-2.{minor}.0-cp311-cp311-macosx_{tag[0]}_{tag[1]}_arm64.whl",
                   {ledger.TORCH_LIB: f"The MPS backend is supported on {said}+. ".encode()})
    release_wheels("macOS 15.0")
    assert ledger.check_table(tmp_path) == 0
    out = capsys.readouterr().out
    assert out.count("✓") == 10 and 'torch 2.15.0: the table says macOS 15.0 (wheels from macOS 14.0)' in out
    release_wheels("macOS 14.0")  # a 2.15 whose library said 14.0 would break the table's row
    assert ledger.check_table(tmp_path) == 1
    assert "✗  torch 2.15.0" in capsys.readouterr().out
