"""Before `run` or `ci` measures: is the repository's name free for it in the store its runs go to?

Runs are filed under a repository's name (its folder's, unless --repository-name or the project file's ``name``
gives one), and the store refuses a run whose history shares no root commit with the one already stored under that
name (another project: two folders called "kernels"; service/pipeline/ingest.py). That refusal comes when the run
is submitted, after the suite was measured; this asks first, so a clash costs a second, not the measurements."""

from __future__ import annotations

import sys
from pathlib import Path

from kernelwatch.errors import InvalidInput
from service.cli.common import open_context
from service.settings import Settings


def stored_name(repo: Path, given: str | None) -> str:
    """The name runs of ``repo`` are stored under: ``given`` (--repository-name, else the project file's name:
    service/cli/measure.py measured_for), else the folder's."""
    from runners.local import repository_name

    return given or repository_name(repo)


def check_same_project(settings: Settings, repo: Path, given: str | None, rev: str) -> None:
    """InvalidInput where the store (local, or the service at KERNELWATCH_URL) holds another project under the name
    runs of ``repo`` at ``rev`` would be stored under."""
    from runners.gitrepo import GitError, first_commits, resolve
    from service.pipeline.ingest import another_project, another_project_message
    from service.store.commits import repositories_sharing_roots, repository_named

    name = stored_name(repo, given)
    try:
        roots = first_commits(repo, resolve(repo, rev))
    except GitError as exc:
        raise InvalidInput(str(exc)) from None
    if not roots:
        return  # a shallow clone: nothing to tell projects apart by, here or at ingest
    if settings.uploads_over_http:
        from service.context import http_uploader

        stored = http_uploader(settings).stored_first_commits(name)
    else:
        with open_context(settings).sessions() as session:
            repository = repository_named(session, name)
            stored = list(repository.first_commits) if repository is not None else []
            same = repositories_sharing_roots(session, roots) if repository is None else []
        if same:
            # README: a clone of a project is the same project; filed by its folder's name it starts another.
            print(f"kernelwatch: warning: {name!r} is new to this store, but its history is that of "
                  f"{' and '.join(repr(n) for n in same)} (the same first commit): its runs start a project of "
                  f"their own; --repository-name {same[0]} (or name = '{same[0]}' in its kernelwatch.toml) files "
                  "them with it", file=sys.stderr)
    if another_project(stored, roots):
        raise InvalidInput(another_project_message(name, stored, roots))
