"""A suite run asked for through the API or `kernelwatch submit`: refused where a runner could not act on it, before
it is answered "queued" (it was refused only in the runner's log, or its queue had no worker)."""

from __future__ import annotations

import pytest

from kernelwatch.errors import InvalidInput
from service.pipeline.suite_tasks import suite_task

GOOD = {"repo": "https://github.com/acme/kernels.git", "commit": "main"}


@pytest.mark.parametrize(("fields", "said"), [
    ({"repo": "ext::sh -c touch% /tmp/x"}, "not a repository location"),
    ({"repo": "fd::3"}, "not a repository location"),
    ({"repo": "http://169.254.169.254/latest"}, "not a repository location"),
    ({"repo": "a\nb"}, "not a repository location"),
    ({"repo": "--upload-pack=x"}, "not a repository location"),
    ({"repo": "x" * 2001}, "at most 2000 characters"),
    ({"commit": "--upload-pack=touch /tmp/x"}, "is not a revision"),
    ({"commit": "HEAD\nfoo"}, "is not a revision"),
    ({"hardware": "CPU"}, "not a runner queue suffix"),
    ({"hardware": "a b"}, "not a runner queue suffix"),
    ({"hardware": "../../x"}, "not a runner queue suffix"),
    ({"suite": "s" * 100_000}, "'suite' is a glob"),
    ({"suite": "softmax/\x1b[31m"}, "'suite' is a glob"),
    ({"params": {"n": 1}}, "'params' is a string"),
    ({"params": "n"}, "'params'"),
    ({"samples": 99999999999999}, "'samples' is a whole number"),
    ({"samples": True}, "'samples' is a whole number"),
    ({"trigger": "cron"}, "'trigger' is one of"),
    ({"branch": "-x"}, "'branch' is a branch name"),
    ({"rounds": 0}, "'rounds' is a whole number from 1 to 64"),
    ({"rounds": 65}, "'rounds' is a whole number"),
    ({"rounds": "4"}, "'rounds' is a whole number"),
    ({"capture": 1}, "'capture' is true or false"),
])
def test_what_a_runner_could_not_act_on_is_refused(fields: dict[str, object], said: str) -> None:
    with pytest.raises(InvalidInput, match=said):
        suite_task({**GOOD, **fields})


def test_a_good_request_is_the_task_a_runner_takes() -> None:
    hardware, task = suite_task({**GOOD, "hardware": "tpu-v5e-8", "params": "n=8", "samples": 5})
    assert hardware == "tpu-v5e-8"
    assert task == {"repo": GOOD["repo"], "commit": "main", "suite": "*", "params": "n=8", "quick": False,
                    "samples": 5, "trigger": "manual", "branch": None, "capture": True, "rounds": 1}
    # Rounds and capture as `kernelwatch submit --rounds 3 --no-capture` asks for them through the API.
    asked = suite_task({**GOOD, "rounds": 3, "capture": False})[1]
    assert (asked["rounds"], asked["capture"]) == (3, False)
    # An absolute path is the runner's to find on its own host.
    assert suite_task({**GOOD, "repo": "/srv/repos/kernels"})[1]["repo"] == "/srv/repos/kernels"
