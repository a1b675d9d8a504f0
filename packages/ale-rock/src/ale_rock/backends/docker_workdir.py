"""Committing a read-only-root sandbox: its work dir is a host bind mount, which ``docker
commit`` does not capture, so the dir is layered onto the committed image as one more layer."""

from __future__ import annotations

import contextlib
import tarfile
import tempfile
from pathlib import Path
from typing import Any


def commit_with_workdir(
    api: Any, base: str, name: str, work: Path, workdir: str, conf: dict[str, Any]
) -> str:
    """Copy ``work`` (host) to ``workdir`` on top of image ``base``, commit it as ``name``
    (``repo:tag``) and drop the untagged ``base`` when nothing else uses it.

    Returns the new image id. ``api`` is a ``docker.APIClient``.
    """
    repo, _, tag = name.rpartition(":")
    container = api.create_container(base, command=["true"], labels={"ale.transient": "commit"})["Id"]
    try:
        with tempfile.TemporaryFile() as buf:
            with tarfile.open(fileobj=buf, mode="w") as tar:
                # Numeric owners are kept, so files stay the sandbox user's in the new image.
                tar.add(str(work), arcname=workdir.lstrip("/") or ".", recursive=True)
            buf.seek(0)
            api.put_archive(container, "/", buf)
        labels = {**conf.get("Labels", {}), "ale.transient": ""}
        return str(api.commit(container, repository=repo, tag=tag, conf={**conf, "Labels": labels})["Id"])
    finally:
        with contextlib.suppress(Exception):
            api.remove_container(container, v=True, force=True)
        with contextlib.suppress(Exception):  # still referenced as the new image's parent: keep it
            api.remove_image(base, noprune=False)
