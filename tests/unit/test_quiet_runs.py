"""Runs as quiet as their samples (service/detect/run_stats.py's note): on a host whose runs agree as closely as
their samples allow, the samples' spread is brought into the test; on one whose runs land apart, never.

Generated nested data: each run's log median moves by ``between`` from run to run, each sample by ``within``
inside a run (log-normal, as timings are)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from service.detect.compare import BenchmarkKey, CompareParams, Comparison, Pair, Side, compare
from service.detect.confirmation import decide
from service.detect.run_stats import (
    QUIET_HISTORY_DF,
    QuietSide,
    RunNoise,
    SampleSpread,
    TrimmedSpread,
    could_be_quiet,
    history_is_quiet,
    pooled_noise,
    quiet_side,
    sample_spread,
    trimmed_spread,
    with_samples,
)

WITHIN = 0.03  # samples inside a run, 3 % apart
SAMPLES = 10


def runs(level: float, count: int, rng: np.random.Generator, between: float = 0.0) -> list[list[float]]:
    return [np.exp(math.log(level) + between * rng.standard_normal()
                   + WITHIN * rng.standard_normal(SAMPLES)).tolist() for _ in range(count)]


def stored(rng: np.random.Generator, between: float = 0.0, commits: int = 6, per_commit: int = 3,
           samples: bool = True) -> RunNoise:
    """A series' stored history: ``commits`` commits of ``per_commit`` runs of the same code."""
    history = [runs(1e-3, per_commit, rng, between) for _ in range(commits)]
    noise = pooled_noise([[math.log(float(np.median(run))) for run in commit] for commit in history])
    assert noise is not None
    return with_samples(noise, history) if samples else noise


def row(base: list[list[float]], head: list[list[float]], noise: RunNoise | None) -> Comparison:
    pair = Pair(BenchmarkKey("s", "k"), Side.of_runs(base), Side.of_runs(head), noise)
    return compare([pair], CompareParams()).rows[0]


def test_sample_spread_reads_the_variance_of_a_runs_median_from_its_samples() -> None:
    rng = np.random.default_rng(0)
    generated = runs(1e-3, 4000, rng)  # enough runs that their medians' variance is known within 2.2 % (sd)
    spread = sample_spread(generated)
    assert spread is not None
    actual = float(np.var(np.log([np.median(r) for r in generated]), ddof=1))
    # At its finite-sample value (1.37 sd^2 / n at 10 samples, where the asymptotic pi/2 reads 14 % wide): the spread
    # between runs is what runs show beyond it, so it must err neither way.
    assert 0.9 <= spread.median_var / actual <= 1.1
    assert spread.df == pytest.approx(0.86 * 4000 * (SAMPLES - 1))


def test_sample_spread_is_unknown_where_it_cannot_be_read() -> None:
    assert sample_spread([[1.0, 1.1, 1.2, 0.9]]) is None  # fewer than 5 samples
    assert sample_spread([[1.0] * 10]) is None  # a timer's resolution: no spread to read
    assert sample_spread([[1.0, 1.1, 0.0, 1.2, 0.9]]) is None  # no log of zero
    assert sample_spread([]) is None
    # One slow sample barely moves it (pairwise differences, their median).
    clean = sample_spread([[1.0, 1.01, 0.99, 1.02, 0.98, 1.0]])
    spiked = sample_spread([[1.0, 1.01, 0.99, 1.02, 0.98, 5.0]])
    assert clean is not None and spiked is not None and spiked.median_var < 3 * clean.median_var
    with pytest.raises(ValueError):
        SampleSpread(0.0, 10)
    with pytest.raises(ValueError):
        QuietSide(np.zeros(2), math.nan, 5, 0.2)


def test_the_trimmed_mean_of_a_run_and_its_variance_from_the_samples() -> None:
    """Yuen's winsorized variance reads how far a run's trimmed mean moves from its samples alone; the trimmed mean
    moves less than the median (what the quiet test gains), and one wild sample moves neither."""
    rng = np.random.default_rng(3)
    generated = runs(1e-3, 400, rng)
    side = quiet_side(generated)
    assert side is not None and side.means.shape == (400,)
    actual = float(np.var(side.means, ddof=1))
    assert 0.85 <= side.mean_var / actual <= 1.25
    assert side.mean_df == 400 * (SAMPLES - 2 * 2 - 1)  # 10 samples, 2 cut at each end
    assert actual < 0.9 * float(np.var(np.log([np.median(r) for r in generated]), ddof=1))
    run = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0]
    spiked = [*run[:-1], 50.0]
    clean, wild = quiet_side([run]), quiet_side([spiked])
    assert clean is not None and wild is not None and abs(float(wild.means[0] - clean.means[0])) < 0.01
    # Runs of different sizes are each trimmed by their own size, in the order given.
    mixed = quiet_side([run, [2.0] * 4 + [2.1] * 3, run[:6]])
    assert mixed is not None
    assert mixed.means[1] == pytest.approx(float(np.mean(np.log([2.0, 2.0, 2.0, 2.1, 2.1]))))
    assert quiet_side([run, [1.0, 2.0]]) is None  # a run too short to read
    assert quiet_side([]) is None


def test_only_a_history_whose_runs_agree_as_closely_as_their_samples_is_quiet() -> None:
    rng = np.random.default_rng(1)
    quiet = sum(history_is_quiet(stored(rng)) for _ in range(200)) / 200
    # The history's test is at 0.01: a history whose runs agree fails it about that often by chance.
    assert quiet >= 0.95
    # Runs 3 % apart against a median that moves 1.1 % from its samples: this machine's hosts are noisier still.
    assert sum(history_is_quiet(stored(rng, between=0.03)) for _ in range(200)) / 200 <= 0.02
    assert not history_is_quiet(stored(rng, samples=False))  # no samples: cannot tell
    few = stored(rng, commits=2, per_commit=3)  # 4 degrees of freedom between runs: too few to tell
    assert few.df < QUIET_HISTORY_DF and not history_is_quiet(few)
    assert not history_is_quiet(None)


def test_a_history_is_read_as_the_quiet_test_reads_a_side() -> None:
    """A history's runs' trimmed means vary by both components at once: the samples' share alone where the runs
    agree, that plus the spread between runs where they move 1 % apart; its samples' figure is the same either way.
    A side whose runs keep fewer samples gets the larger share."""
    rng = np.random.default_rng(8)
    agree = [stored(rng, commits=40).trimmed for _ in range(30)]
    apart = [stored(rng, between=0.01, commits=40).trimmed for _ in range(30)]
    assert all(isinstance(t, TrimmedSpread) for t in agree + apart)
    share = float(np.mean([t.sample_var * t.inverse_kept for t in agree if t]))
    assert 0.85 <= float(np.mean([t.run_var for t in agree if t])) / share <= 1.15
    assert 0.8 <= (float(np.mean([t.run_var for t in apart if t])) - share) / 0.01 ** 2 <= 1.2
    samples = [float(np.mean([t.sample_var for t in group if t])) for group in (agree, apart)]
    assert 0.9 <= samples[1] / samples[0] <= 1.1
    history = agree[0]
    assert history is not None and history.run_df == 40 * 2
    short = quiet_side([runs(1e-3, 1, rng)[0][:6]])
    same = quiet_side(runs(1e-3, 1, rng))
    assert short is not None and same is not None
    assert history.run_variance(same) == pytest.approx(history.run_var, rel=0.01)
    assert history.run_variance(short) > history.run_var
    assert trimmed_spread([runs(1e-3, 1, rng)]) is None  # no commit with two runs
    assert trimmed_spread([runs(1e-3, 2, rng) + [[1.0, 2.0]]]) is None  # a run too short to read
    with pytest.raises(ValueError):
        TrimmedSpread(0.0, 4, 1e-4, 10, 0.2)


def test_a_side_whose_samples_spread_wider_than_the_history_s_is_not_quiet() -> None:
    """One run has no spread between runs of its own to show a host gone noisy since the history; its samples do:
    three times the history's spread is not quiet."""
    rng = np.random.default_rng(12)
    noise = stored(rng)
    wide = [(np.exp(math.log(1e-3) + 3 * WITHIN * rng.standard_normal(SAMPLES))).tolist()]
    assert row(runs(1e-3, 1, rng), wide, noise).method != "quiet"
    assert row(runs(1e-3, 1, rng), runs(1e-3, 1, rng), noise).method == "quiet"


def test_quiet_runs_use_their_samples_and_a_noisy_side_does_not() -> None:
    rng = np.random.default_rng(2)
    noise = stored(rng)
    assert history_is_quiet(noise)
    found = row(runs(1e-3, 2, rng), runs(1.05e-3, 2, rng), noise)
    assert found.method == "quiet" and found.verdict == "regression" and found.df is not None and found.df > 20
    # The same runs against a history whose samples are unknown: the run-level test, which needs more runs.
    assert row(runs(1e-3, 2, rng), runs(1e-3, 2, rng), RunNoise(noise.sd, noise.df)).method == "welch"
    # A side whose runs land apart (the host turned noisy since the history): not quiet, whatever the history.
    noisy = [*runs(1e-3, 2, rng), *runs(1.15e-3, 1, rng)]
    assert row(runs(1e-3, 3, rng), noisy, noise).method == "welch"
    # One run a side is tested on its samples too (the history vouches for the runs' agreement), and four runs a
    # side take the moderated test (it has the degrees of freedom).
    assert row(runs(1e-3, 1, rng), runs(1.08e-3, 1, rng), noise).method == "quiet"
    assert row(runs(1e-3, 4, rng), runs(1e-3, 4, rng), noise).method == "welch"


# (runs a side, planted effect, the least it finds, how much more than the run-level test on the same draws): the
# samples decide what two or three run medians cannot.
@pytest.mark.parametrize(("budget", "effect", "least", "gain"),
                         [(1, 0.05, 0.75, 0.05), (2, 0.05, 0.9, 0.3), (3, 0.03, 0.85, 0.25)])
def test_quiet_a_a_stays_within_alpha_and_finds_what_the_runs_alone_miss(budget: int, effect: float, least: float,
                                                                         gain: float) -> None:
    """Every draw fresh (history, base, head), so the rates are of independent comparisons."""
    rng = np.random.default_rng(10 + budget)
    trials = 400
    false, found, found_without = 0, 0, 0
    for _ in range(trials):
        noise = stored(rng)
        false += row(runs(1e-3, budget, rng), runs(1e-3, budget, rng), noise).verdict in ("regression",
                                                                                      "improvement")
        base, head = runs(1e-3, budget, rng), runs(1e-3 * (1 + effect), budget, rng)
        found += row(base, head, noise).verdict == "regression"
        found_without += row(base, head, RunNoise(noise.sd, noise.df)).verdict == "regression"
    assert false / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)
    assert found / trials >= least
    assert found / trials >= found_without / trials + gain


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_a_a_stays_within_alpha_where_runs_vary_as_much_as_their_samples(budget: int) -> None:
    """Runs 1 % apart against a median that moves about 1 % from its samples: histories there pass the history's
    test, and what spread between runs they show is estimated and counted (assumed away, as the preliminary test at
    0.25 did for those it let through, it is what would make A/A false verdicts). Fresh draws every trial."""
    rng = np.random.default_rng(20 + budget)
    trials, false, quiet = 400, 0, 0
    for _ in range(trials):
        noise = stored(rng, between=0.01)
        found = row(runs(1e-3, budget, rng, 0.01), runs(1e-3, budget, rng, 0.01), noise)
        false += found.verdict in ("regression", "improvement")
        quiet += found.method == "quiet"
    assert quiet / trials >= 0.5  # the samples were brought in for most
    assert false / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


def test_a_history_that_shows_some_spread_between_runs_is_tested_with_it() -> None:
    """The same runs against a history whose runs agree and one whose runs move 1.5 % apart: both take the samples
    (the latter's spread short of the history's test), the latter with the wider interval."""
    rng = np.random.default_rng(9)
    def beyond(noise: RunNoise) -> float:
        assert noise.trimmed is not None
        return noise.trimmed.run_var - noise.trimmed.sample_var * noise.trimmed.inverse_kept

    calm = stored(rng, commits=12)
    while beyond(calm) > 0:
        calm = stored(rng, commits=12)
    moving = stored(rng, between=0.015, commits=12)
    while not history_is_quiet(moving) or beyond(moving) < 1e-4:
        moving = stored(rng, between=0.015, commits=12)
    base, head = runs(1e-3, 1, rng), runs(1.06e-3, 1, rng)
    first, second = row(base, head, calm), row(base, head, moving)
    assert first.method == second.method == "quiet"
    assert first.ratio_low is not None and first.ratio_high is not None
    assert second.ratio_low is not None and second.ratio_high is not None
    assert second.ratio_high / second.ratio_low > first.ratio_high / first.ratio_low


def test_a_host_whose_runs_land_apart_never_takes_the_quiet_test() -> None:
    rng = np.random.default_rng(4)
    methods = set()
    for _ in range(100):
        noise = stored(rng, between=0.1)  # this machine: runs about 10 % apart
        methods.add(row(runs(1e-3, 3, rng, 0.1), runs(1e-3, 3, rng, 0.1), noise).method)
    assert methods == {"welch"}


def test_confirmation_uses_the_samples_of_quiet_runs() -> None:
    rng = np.random.default_rng(6)
    noise = stored(rng)
    assert history_is_quiet(noise)
    decision = decide(runs(1e-3, 2, rng), runs(1.06e-3, 2, rng), expect_increase=True, rounds=2, noise=noise)
    assert decision.method == "quiet" and decision.verdict == "confirmed"
    assert "samples' spread" in decision.describe()
    # Runs given as their medians alone carry no samples: the run-level test.
    medians = decide([1e-3, 1.001e-3], [1.06e-3, 1.061e-3], expect_increase=True, rounds=2, noise=noise)
    assert medians.method == "welch"


def test_the_cheap_screen_never_turns_away_a_quiet_history() -> None:
    """run_noise reads a history's samples only where ``could_be_quiet`` says the runs' ranges allow a quiet
    verdict: a bound, so it must hold wherever the full test passes, and turn away a host whose runs land apart."""
    rng = np.random.default_rng(7)
    for between in (0.0, 0.005, 0.01, 0.2):
        for _ in range(100):
            history = [runs(1e-3, 3, rng, between) for _ in range(6)]
            noise = pooled_noise([[math.log(float(np.median(r))) for r in commit] for commit in history])
            assert noise is not None
            flat = [run for commit in history for run in commit]
            full = with_samples(noise, history)
            if history_is_quiet(full):
                assert could_be_quiet(noise, flat)
            if between == 0.2:
                assert not could_be_quiet(noise, flat)  # runs 20 % apart, samples 3 %: not read at all


def test_the_legend_says_where_samples_counted() -> None:
    from service.detect.compare import ComparisonReport
    from service.report.compare_table import significance_line

    rng = np.random.default_rng(6)
    noise = stored(rng)
    quiet_pair = Pair(BenchmarkKey("s", "k"), Side.of_runs(runs(1e-3, 2, rng)), Side.of_runs(runs(1.05e-3, 2, rng)),
                      noise)
    report: ComparisonReport = compare([quiet_pair], CompareParams())
    assert report.rows[0].method == "quiet"
    assert "as quiet as their samples" in significance_line(report)
    plain = compare([Pair(BenchmarkKey("s", "k"), quiet_pair.base, quiet_pair.head, None)], CompareParams())
    assert "as quiet" not in significance_line(plain)


def test_every_face_s_legend_says_where_samples_counted(tmp_path: Path) -> None:
    """The PR comment's legend and the compare page's say it as the text table's does."""
    from service.report.compare_table import QUIET_CLAUSE, SideLabel
    from service.report.pr_comment import CommentContext, format_comment

    rng = np.random.default_rng(6)
    noise = stored(rng)
    pair = Pair(BenchmarkKey("s", "k"), Side.of_runs(runs(1e-3, 2, rng)), Side.of_runs(runs(1.05e-3, 2, rng)), noise)
    report = compare([pair], CompareParams())
    assert report.rows[0].method == "quiet"
    ctx = CommentContext(SideLabel("main", "repo", "a" * 40), SideLabel("pr", "repo", "b" * 40))
    assert QUIET_CLAUSE in format_comment(report, ctx)
    assert QUIET_CLAUSE not in format_comment(compare([replace(pair, noise=None)], CompareParams()), ctx)
    # The page renders the same words where a listed row is quiet, and none where no row is.
    from flask import render_template_string

    from service.app import create_app
    from service.settings import load_settings

    template = (Path(__file__).resolve().parents[2] / "web" / "templates" / "_compare_table.html").read_text()
    legend = template[template.index("runs are the replicates"):template.index("significant:")]
    app = create_app(load_settings({"KERNELWATCH_HOME": str(tmp_path),
                                    "KERNELWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'kw.db'}"}))
    with app.app_context():
        assert QUIET_CLAUSE in render_template_string(legend, report=report).replace("&#39;", "'")
        assert "quiet" not in render_template_string(legend, report=compare([replace(pair, noise=None)],
                                                                              CompareParams()))
