"""The host-health figures (runners/host_health.py) from fixture /proc texts with known answers, the CPU lists of
pinning (runners/pinning.py), and the figures' agreement with the manifest's contract."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwatch.errors import InvalidInput
from runners.host_health import (
    HEAVY_STEAL_FRACTION,
    CpuCounters,
    GpuSample,
    HostSampler,
    Snapshot,
    figures,
    heavy,
    parse_loadavg,
    parse_proc_stat,
    throttle_reason_names,
)
from runners.pinning import checked_affinity, format_cpu_list, parse_cpu_list
from service.contract import HostHealthInfo

# A 2-CPU Linux 6.x /proc/stat (abridged after the CPU lines): user nice system idle iowait irq softirq steal guest
# guest_nice.
STAT = """\
cpu  5613 3 2723 33698 250 11 65 700 40 2
cpu0 1711 1 934 18507 17 5 19 300 20 1
cpu1 3901 2 1788 15190 232 6 45 400 20 1
intr 1234567 0 9 0 0
ctxt 2345678
btime 1796140000
processes 7000
procs_running 2
procs_blocked 0
softirq 456789 0 1 2 3
"""


def counters(user: int = 0, system: int = 0, idle: int = 0, iowait: int = 0, steal: int = 0,
             cores: int = 2) -> CpuCounters:
    return CpuCounters(user=user, nice=0, system=system, idle=idle, iowait=iowait, irq=0, softirq=0, steal=steal,
                       cores=cores)


def test_the_aggregate_line_is_read_and_guest_time_not_counted_twice() -> None:
    cpu = parse_proc_stat(STAT)
    assert (cpu.user, cpu.nice, cpu.system, cpu.idle, cpu.iowait, cpu.irq, cpu.softirq, cpu.steal) == \
        (5613, 3, 2723, 33698, 250, 11, 65, 700)
    # guest (40) and guest_nice (2) are inside user and nice already: the total leaves them out.
    assert cpu.total == 5613 + 3 + 2723 + 33698 + 250 + 11 + 65 + 700
    assert cpu.cores == 2


def test_a_kernel_without_the_steal_field_reads_as_no_steal() -> None:
    cpu = parse_proc_stat("cpu  10 0 5 100\ncpu0 10 0 5 100\n")
    assert cpu.steal == 0 and cpu.iowait == 0 and cpu.total == 115 and cpu.cores == 1


@pytest.mark.parametrize("text", ["", "cpu0 1 2 3 4\n", "cpu  1 2 x 4 5 6 7 8\n", "cpu  1 2\n"])
def test_text_without_a_well_formed_aggregate_line_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="cpu"):
        parse_proc_stat(text)


def test_the_load_average_is_the_first_field() -> None:
    assert parse_loadavg("0.40 0.26 0.11 1/145 7146\n") == 0.40
    for bad in ("", "nan 1 1", "-1 0 0", "x"):
        with pytest.raises(ValueError):
            parse_loadavg(bad)


def test_figures_are_shares_of_the_interval_not_of_the_time_since_boot() -> None:
    # Since boot: much steal. Over the interval: 300 user, 100 system, 450 idle, 50 iowait, 100 steal of 1000.
    start = Snapshot(cpu=counters(user=10_000, system=1_000, idle=50_000, iowait=100, steal=9_000), load_1m=0.5)
    end = Snapshot(cpu=counters(user=10_300, system=1_100, idle=50_450, iowait=150, steal=9_100), load_1m=1.75)
    assert figures(start, end) == {"steal_fraction": 0.1, "busy_fraction": 0.4, "cores": 2, "load_1m": 1.75}


def test_no_load_average_leaves_it_out() -> None:
    start = Snapshot(cpu=counters(user=0, idle=0), load_1m=None)
    end = Snapshot(cpu=counters(user=3, idle=1), load_1m=None)
    assert figures(start, end) == {"steal_fraction": 0.0, "busy_fraction": 0.75, "cores": 2}


def test_an_interval_with_no_tick_or_counters_going_back_has_no_figures() -> None:
    same = Snapshot(cpu=counters(user=5, idle=5), load_1m=0.1)
    assert figures(same, same) is None
    after_reboot = Snapshot(cpu=counters(user=1, idle=100), load_1m=0.1)
    assert figures(same, after_reboot) is None


def test_gpus_come_from_the_end_snapshot_with_their_reasons_named() -> None:
    start = Snapshot(cpu=counters(idle=0), load_1m=0.0, gpus=(GpuSample(0, 1980, 2619, 0x1),))
    end = Snapshot(cpu=counters(user=10, idle=10), load_1m=0.0,
                   gpus=(GpuSample(0, 1410, 2619, 0x4 | 0x40), GpuSample(1, None, None, None)))
    health = figures(start, end)
    assert health is not None and health["gpus"] == [
        {"index": 0, "sm_clock_mhz": 1410, "mem_clock_mhz": 2619,
         "throttle_reasons": ["sw_power_cap", "hw_thermal_slowdown"]},
        {"index": 1, "throttle_reasons": []},
    ]


def test_throttle_bits_nvml_does_not_document_are_kept_by_value() -> None:
    assert throttle_reason_names(0) == []
    assert throttle_reason_names(0x1 | 0x1000) == ["gpu_idle", "bit_0x1000"]


def test_heavy_steal_starts_at_the_threshold() -> None:
    assert heavy({"steal_fraction": HEAVY_STEAL_FRACTION})
    assert not heavy({"steal_fraction": HEAVY_STEAL_FRACTION - 1e-6})
    assert not heavy(None) and not heavy({}) and not heavy({"steal_fraction": None})


def test_the_figures_are_what_the_manifest_contract_accepts() -> None:
    start = Snapshot(cpu=counters(user=1, idle=1), load_1m=0.25)
    end = Snapshot(cpu=counters(user=2, idle=2, steal=1), load_1m=0.5,
                   gpus=(GpuSample(0, 1500, 2600, 0x20 | 0x100000),))
    health = figures(start, end)
    assert health is not None
    parsed = HostHealthInfo.model_validate(health)
    assert parsed.model_dump(exclude_none=True) == health


def test_the_sampler_reads_the_proc_directory_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text(STAT)
    (tmp_path / "loadavg").write_text("2.50 1.00 0.50 3/200 999\n")
    snap = HostSampler(tmp_path, gpus=lambda: (GpuSample(0, 1000, 2000, 0),)).snapshot()
    assert snap is not None
    assert snap.cpu == parse_proc_stat(STAT) and snap.load_1m == 2.5 and snap.gpus == (GpuSample(0, 1000, 2000, 0),)


def test_the_sampler_without_a_readable_stat_gives_nothing_and_without_loadavg_no_load(tmp_path: Path) -> None:
    assert HostSampler(tmp_path).snapshot() is None  # no stat file: macOS, a locked-down container
    (tmp_path / "stat").write_text(STAT)
    snap = HostSampler(tmp_path).snapshot()
    assert snap is not None and snap.load_1m is None and snap.gpus == ()


def test_a_gpu_reader_that_fails_mid_run_leaves_the_cpu_figures(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text(STAT)

    def gone() -> tuple[GpuSample, ...]:
        raise RuntimeError("GPU is lost")

    snap = HostSampler(tmp_path, gpus=gone).snapshot()
    assert snap is not None and snap.gpus == ()


def test_the_real_proc_stat_parses_where_there_is_one() -> None:
    stat = Path("/proc/stat")
    if not stat.exists():
        pytest.skip("no /proc/stat on this platform")
    cpu = parse_proc_stat(stat.read_text())
    assert cpu.total > 0 and cpu.cores >= 1


@pytest.mark.parametrize(("text", "cpus"), [("0", (0,)), ("0-3,6", (0, 1, 2, 3, 6)), ("6,0-1,1", (0, 1, 6))])
def test_cpu_lists_read_and_write_as_the_kernel_writes_them(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus
    assert format_cpu_list((0, 1, 2, 3, 6)) == "0-3,6"


@pytest.mark.parametrize("text", ["", "-1", "3-1", "a", "0,,1", "0-"])
def test_a_malformed_cpu_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpu_list(text)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_pinning_is_checked_against_the_cpus_this_process_may_use() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    assert checked_affinity(None) is None
    assert checked_affinity([allowed[0], allowed[0]]) == (allowed[0],)
    with pytest.raises(InvalidInput, match=r"cannot pin to CPU\(s\) 4096"):
        checked_affinity([allowed[0], 4096])
    with pytest.raises(InvalidInput, match="no CPU"):
        checked_affinity([])
