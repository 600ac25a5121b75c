"""PTX -> SASS on GPU hosts. The CUDA tools cannot run here, so stand-ins on a real PATH play ptxas (copies its
input) and cuobjdump (prints a SASS listing in FORMATS.md's grammar): what is tested is the plumbing around
them: finding the tools, the arguments, failures kept out of the benchmark, and the artifact that results."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from runners.artifacts import ArtifactStore
from runners.capture import Capturer
from runners.parsers.by_kind import parse
from runners.ptx_to_sass import find_tools, sass_from_ptx, sm_arch

LISTING = """
	code for sm_90
		Function : fusion_1
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0020*/                   FFMA R0, R2, R2, R0 ;
        /*0030*/                   STG.E desc[UR4][R4.64], R0 ;
        /*0040*/                   EXIT ;
        /*0050*/                   BRA 0x50;
"""


def tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    # ptxas -arch=sm_90 in.ptx -o out.cubin: insists on the architecture, "assembles" by copying
    tool(folder, "ptxas", '[ "$1" = "-arch=sm_90" ] || { echo "wrong arch $1" >&2; exit 1; }; cp "$2" "$4"\n')
    refuse = "grep -q 'kernel' \"$2\" || { echo 'bad cubin' >&2; exit 1; }"
    tool(folder, "cuobjdump", f"{refuse}\ncat <<'EOF'\n{LISTING}EOF\n")
    return folder


def test_tools_are_found_in_the_folders_searched_and_only_there(tools: Path, tmp_path: Path) -> None:
    found = find_tools([tools])
    assert found is not None and found.ptxas == tools / "ptxas" and found.lister_args == ["-sass"]
    assert find_tools([tmp_path]) is None


def test_the_listing_of_a_module_is_what_cuobjdump_prints(tools: Path) -> None:
    found = find_tools([tools])
    assert found is not None
    assert sass_from_ptx(b"// a kernel\n", "sm_90", found) == LISTING
    with pytest.raises(RuntimeError, match="cuobjdump failed: bad cubin"):
        sass_from_ptx(b"// nothing\n", "sm_90", found)
    with pytest.raises(RuntimeError, match="ptxas failed: wrong arch -arch=sm_80"):
        sass_from_ptx(b"// a kernel\n", "sm_80", found)


def test_compute_capability_names_the_architecture() -> None:
    assert sm_arch("9.0") == "sm_90" and sm_arch("8.6") == "sm_86" and sm_arch("10") == "sm_100"
    with pytest.raises(ValueError):
        sm_arch("gpu")


def test_capture_stores_sass_beside_each_dumped_ptx_and_survives_a_failing_tool(tools: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    store = ArtifactStore(tmp_path / "store")

    class Compiled:
        def as_text(self) -> str:
            return "HloModule m\n"

    capturer = Capturer(store, dump, "sm_90", find_tools([tools]))
    capturer.start()
    (dump / "module_0001.jit_f.ptx").write_text("// kernel fusion_1\n")
    (dump / "module_0002.jit_g.ptx").write_text("// broken\n")  # the stand-in cuobjdump refuses this one
    capturer.after_compile(Compiled())
    by_name = {ref.name: ref for ref in capturer.refs}
    assert {"module_0001.jit_f.ptx", "module_0002.jit_g.ptx", "module_0001.jit_f.sass"} <= set(by_name)
    assert "module_0002.jit_g.sass" not in by_name
    sass = by_name["module_0001.jit_f.sass"]
    assert sass.kind == "sass"
    (kernel,) = parse("sass", store.get(sass.sha256), "module_0001.jit_f.sass")["kernels"]
    assert kernel["name"] == "fusion_1" and kernel["instructions"] == 6
