from types import SimpleNamespace

from runners.capture import cost_figures, dump_kind, memory_figures


def test_unknown_cost_figures_are_left_out() -> None:
    compiled = SimpleNamespace(cost_analysis=lambda: [{"flops": 10.0, "optimal_seconds": -1.0,
                                                        "bytes accessed": 8.0, "bytes accessed0{}": 4.0,
                                                        "transcendentals": float("nan")}])
    assert cost_figures(compiled) == {"flops": 10.0, "bytes accessed": 8.0}


def test_a_backend_without_analyses_gives_nothing() -> None:
    def unsupported() -> None:
        raise NotImplementedError

    compiled = SimpleNamespace(cost_analysis=unsupported, memory_analysis=unsupported)
    assert cost_figures(compiled) == {} and memory_figures(compiled) == {}


def test_dump_files_are_sorted_by_kind() -> None:
    assert dump_kind("module_0001.jit_f.cpu_after_optimizations.txt") == "hlo"
    assert dump_kind("module_0001.jit_f.obj-file.add_fusion_kernel_module.o") == "x86-obj"
    assert dump_kind("module_0001.jit_f.ptx") == "ptx"
    assert dump_kind("1234-fusion.7-final_bundles.txt") == "llo"
    assert dump_kind("module_0001.jit_f.ir-with-opt.ll") is None


def test_dump_locations_do_not_change_the_environment() -> None:
    from runners.fingerprint import comparable_flags

    flags = "--xla_cpu_max_isa=AVX2 --xla_dump_to=/tmp/kw-xla-dump-abc --xla_dump_hlo_as_text"
    assert comparable_flags(flags) == "--xla_cpu_max_isa=AVX2"
    assert comparable_flags("--xla_jf_dump_to=/tmp/x/llo --xla_tpu_foo=1") == "--xla_tpu_foo=1"
