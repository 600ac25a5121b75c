"""A planted change after which XLA renumbers the benchmark's fusions, captured from real XLA CPU output and stored
through the real pipeline: the head adds a dot that XLA names ``ynn_fusion``, so the base's ``ynn_fusion`` (a dot)
becomes ``ynn_fusion.1`` and its ``ynn_fusion.1`` (a reduction) ``ynn_fusion.2``; it also adds a sort before the
base's own, which (an op of its own, no fusion) comes back under another number. The attribution's op
table, its static diff and the Diff page's op table, kernel list and fusion list pair base and head fusions, and
the other ops, by structure: the renumbered ones read as the same, unchanged, and only the new dot and sort are
new."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from runners.local import RunRequest, run_commits
from service.app import create_app
from service.context import Context
from service.detect.fusion_pairing import source_text
from service.settings import load_settings
from service.store.models import Finding, HloModuleRecord, Result, Run, Series
from tests.diff_capture import StepAtLatest, store_captured
from tests.gitrepo import two_commit_suite_repo

# One line changes (EXTRA), so no other line moves: the unchanged fusions keep their source lines.
KERNEL = '''import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark

EXTRA = False


def kernel(x, y, w):
    out = [jnp.sum(y * y, axis=-1), jnp.exp(x) @ w]
    if EXTRA:
        out.append(jnp.tanh(y @ w))
        out.append(jnp.sort(w, axis=0))
    out.append(x * 2.0 + 1.0)
    out.append(jnp.sort(y, axis=-1))
    return tuple(out)


def reference(x, y, w):
    out = [np.sum(y * y, axis=-1), np.exp(x) @ w]
    if EXTRA:
        out.append(np.tanh(y @ w))
        out.append(np.sort(w, axis=0))
    out.append(x * 2.0 + 1.0)
    out.append(np.sort(y, axis=-1))
    return tuple(out)


@benchmark(suite="tiny", params=[{"n": 64}])
def renumbered(n: int) -> Case:
    x = np.linspace(0.0, 1.0, n * n, dtype=np.float32).reshape(n, n)
    y = np.linspace(1.0, 0.0, n * n, dtype=np.float32).reshape(n, n)
    w = np.linspace(-1.0, 1.0, n * n, dtype=np.float32).reshape(n, n) / n
    return Case(fn=jax.jit(kernel), args=(jnp.asarray(x), jnp.asarray(y), jnp.asarray(w)),
                reference=lambda: reference(x, y, w), rtol=1e-3, atol=1e-3)
'''


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    root = tmp_path_factory.mktemp("renumber")
    two_commit_suite_repo(root / "repo", KERNEL, KERNEL.replace("EXTRA = False", "EXTRA = True"),
                          ("a reduction and a dot", "another dot before them"))
    store = ArtifactStore(root / "artifacts")
    requests = [RunRequest(repo=root / "repo", rev=rev, samples=5, warmup=1, capture_dir=store.root)
                for rev in ("HEAD~1", "HEAD")]
    manifests = [m for ms in run_commits(requests, root / "worktrees") for m in ms]
    assert len(manifests) == 2
    return manifests, store.root


@pytest.fixture
def app(sessions: sessionmaker[Session], database_url: str, tmp_path: Path,
        captured: tuple[list[dict[str, Any]], Path]) -> Flask:
    manifests, store_root = captured
    shutil.copytree(store_root, tmp_path / "artifacts")
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    store_captured(ctx.sessions, manifests, ctx.artifacts)
    return create_app(settings, context=ctx)


def _fusions(session: Session) -> dict[int, dict[str, dict[str, Any]]]:
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for record in session.scalars(select(HloModuleRecord)):
        out.setdefault(record.result_id, {}).update({str(f["name"]): f for f in record.fusions})
    return out


def test_renumbered_fusions_pair_by_structure_everywhere(app: Flask) -> None:
    with app.extensions["kernelwatch"].sessions() as s:
        finding = s.scalars(select(Finding).join(Series).where(Finding.detector == StepAtLatest.name,
                                                               Series.metric == "wall_time")).one()
        attribution = finding.attribution
        fusions = _fusions(s)
        ops_of: dict[int, list[dict[str, Any]]] = {}
        for record in s.scalars(select(HloModuleRecord)):
            ops_of.setdefault(record.result_id, []).extend(record.ops or [])
        base_id, head_id = (s.scalars(select(Result.id).join(Series).join(Run, Run.id == Result.run_id)
                                      .where(Series.metric == "wall_time").order_by(Run.commit_id)).all())
    # What real XLA did: the same dot and reduction under new numbers, and a new dot under an old one.
    base, head = (fusions[attribution["basis"][side]["static_result"]] for side in ("before", "after"))
    ynn_b = {n: f for n, f in base.items() if n.startswith("ynn_fusion")}
    ynn_h = {n: f for n, f in head.items() if n.startswith("ynn_fusion")}
    assert len(ynn_b) == 2 and len(ynn_h) == 3, (sorted(base), sorted(head))
    renumbered = {b: h for b, fb in ynn_b.items() for h, fh in ynn_h.items()
                  if fb["fingerprint"] == fh["fingerprint"]
                  and source_text(fb["source"]) == source_text(fh["source"])}
    assert len(renumbered) == 2 and any(b != h for b, h in renumbered.items()), (ynn_b, ynn_h)
    [new] = set(ynn_h) - set(renumbered.values())
    assert new in ynn_b  # the new dot took a name the base gave to another fusion: name matching would be wrong

    # The attribution's op table joins each renumbered fusion's op to its own, and calls none vanished.
    pairing = attribution["static"]["fusion_pairing"]
    added = {new, "wrapped_tanh"}  # the new dot, and the tanh XLA wraps after it
    assert added <= set(head) and "wrapped_tanh" not in base
    assert {p["head"] for p in pairing["added"]} == added
    assert not pairing["removed"] and not pairing["changed"]
    assert {(p["base"], p["head"]) for p in pairing["renamed"]} == {(b, h) for b, h in renumbered.items() if b != h}
    rows = {r["op"]: r for r in attribution["ops"]["rows"]}
    assert any(h in rows for b, h in renumbered.items() if b != h), sorted(rows)  # the trace timed them
    for b, h in renumbered.items():
        if h in rows:
            assert rows[h]["status"] != "appeared" and rows[h]["structure"] in ("same", "renamed")
            assert rows[h]["base_op"] == (b if b != h else None)
    if new in rows:
        assert rows[new]["status"] == "appeared" and rows[new]["structure"] == "added"
    assert not any(r["status"] == "vanished" and r["structure"] is not None for r in attribution["ops"]["rows"])
    # The other ops: the base's sort under a new number is the same sort, the head's other sort a new one.
    sorts_b, sorts_h = ({o["name"]: o for o in ops_of[attribution["basis"][side]["static_result"]]
                         if o["opcode"] == "sort"} for side in ("before", "after"))
    assert len(sorts_b) == 1 and len(sorts_h) == 2, (sorts_b, sorts_h)
    [(old_sort, kept)] = sorts_b.items()
    [same_sort] = [n for n, o in sorts_h.items() if o["fingerprint"] == kept["fingerprint"]]
    [new_sort] = set(sorts_h) - {same_sort}
    assert same_sort != old_sort  # XLA renumbered it: by name it would be another sort, or none
    op_pairing = attribution["static"]["op_pairing"]
    assert [(p["base"], p["head"]) for p in op_pairing["renamed"]] == [(old_sort, same_sort)], op_pairing
    assert [p["head"] for p in op_pairing["added"]] == [new_sort]
    assert not op_pairing["removed"] and not op_pairing["changed"]
    assert {old_sort, same_sort, new_sort} & set(rows), sorted(rows)  # the trace timed the sorts by HLO name
    if same_sort in rows:
        assert rows[same_sort]["base_op"] == old_sort and rows[same_sort]["structure"] == "renamed"
        assert rows[same_sort]["status"] != "appeared"
    if new_sort in rows:
        assert rows[new_sort]["status"] == "appeared" and rows[new_sort]["structure"] == "added"
    # The static diff: the renumbered fusions are neither added nor removed, in the HLO or the kernels.
    for module in attribution["static"]["modules"]:
        assert {f["name"] for f in module["fusions"]["added"]} == added
        assert not module["fusions"]["removed"] and not module["fusions"]["changed"]
    for kernel in attribution["static"]["kernels"]:
        assert kernel["name"] not in renumbered.values() or kernel["status"] == "changed", kernel
    # The summary names what changed, never an unchanged fusion; the op table is reconciled with the wall time.
    lead = attribution["summary"].split(" ")[0]
    assert lead not in {*renumbered.values(), same_sort} or "with the same HLO" in attribution["summary"]
    assert attribution["ops"]["reconciliation"]["note"]

    # The Diff page: the same pairing in its op table, kernel list and fusion list.
    html = app.test_client().get(f"/diff?base={base_id}&head={head_id}").get_data(as_text=True)
    for b, h in renumbered.items():
        if b == h:
            continue
        row = re.search(rf'<tr class="fusion-renamed"><td><a [^>]*><code>{re.escape(h)}</code></a>\s*'
                        rf'<span class="muted small">was <code>{re.escape(b)}</code>', html)
        assert row is not None, h
    assert re.search(rf'<tr class="fusion-added"><td><a [^>]*><code>{re.escape(new)}</code>', html)
    assert 'class="fusion-removed"' not in html and 'class="fusion-changed"' not in html
    assert 'id="fusion-renames"' in html
    # The new dot's name is the base's other dot's (renumbered on the head): its row says so, the renamed do not.
    added_row = re.search(rf'<tr class="fusion-added"><td><a [^>]*><code>{re.escape(new)}</code>.*?</td>', html,
                          re.DOTALL)
    assert added_row is not None and "name-reused" in added_row[0], added_row
    for row in re.findall(r'<tr class="fusion-renamed">.*?</td>', html, re.DOTALL):
        assert "name-reused" not in row, row
    # the head's HLO page lists its sorts among the program's other ops, each with its time where traced
    hlo_page = app.test_client().get(f"/results/{head_id}/hlo").get_data(as_text=True)
    assert 'id="program-ops-' in hlo_page
    for name in (same_sort, new_sort):
        row = rf'<tr id="program-op-{re.escape(name)}"><td><code>{re.escape(name)}</code></td><td>sort</td>'
        assert re.search(row, hlo_page), name
    # the op table pairs the renumbered sort with its base op
    if same_sort in rows:
        renamed_row = (rf'<code>{re.escape(same_sort)}</code> <span class="muted small">was '
                       rf'<code>{re.escape(old_sort)}</code>')
        assert re.search(renamed_row, html), re.findall(r"<code>sort[^<]*</code>.{0,80}", html)
    # the new dot's HLO is shown as new, not diffed against the base's fusion of the same name
    page = app.test_client().get(f"/diff?base={base_id}&head={head_id}&kernel={new}").get_data(as_text=True)
    assert f"Fusion <code>{new}</code>" in page
    assert 'id="fusion-diff"' in page
    table = page[page.index('id="fusion-diff"'):]
    kinds = set(re.findall(r'<tr class="row-(\w+)', table[: table.index("</table>")]))
    assert kinds == {"insert"}, kinds
