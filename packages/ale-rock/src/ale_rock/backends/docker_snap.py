"""Snapshot names of the Docker backend: every commit is tagged ``ale-snap/<namespace>/<name>:<tag>``
and labelled with its namespace, so tenants never see, start from or overwrite each other's images.

The tag is for people; the label ``ale.snap.namespace`` (the raw namespace) is the authority: two
namespaces that sanitise to the same path component still cannot use each other's snapshots.
Pure functions: the Admin imports this module to refuse another namespace's snapshot up front.
"""

from __future__ import annotations

import re

SNAP_PREFIX = "ale-snap/"
"""Every committed image's repository starts with this; nothing else is ever tagged by a commit."""
LABEL_SNAP_NAMESPACE = "ale.snap.namespace"
"""Image label: the namespace that committed it (the raw string)."""
DEFAULT_NAMESPACE = "default"
"""Path component used for sandboxes started without a namespace (direct backend use)."""

_BAD = re.compile(r"[^a-z0-9]+")
_BAD_TAG = re.compile(r"[^A-Za-z0-9_.-]+")


def _component(raw: str, fallback: str) -> str:
    """A Docker repository path component: ``[a-z0-9]+`` joined by single ``-``."""
    out = _BAD.sub("-", raw.lower()).strip("-")[:60].strip("-")
    return out or fallback


class ImageNotFoundError(LookupError):
    """The image does not exist for this namespace (another tenant's snapshot reads the same).

    Maps to NOT_FOUND naming the field ``image``.
    """

    field = "image"


def snapshot_ref(namespace: str, name: str) -> str:
    """``ale-snap/<ns>/<name>:<tag>`` for a commit named ``name`` (``repo[:tag]``, any text)."""
    last = name.rsplit("/", 1)[-1]
    repo, tag = (name.rsplit(":", 1) if ":" in last else (name, ""))
    if repo.startswith(SNAP_PREFIX):  # re-committing a snapshot by its full name: keep its path
        parts = repo[len(SNAP_PREFIX) :].split("/", 1)
        repo = parts[1] if len(parts) == 2 else parts[0]
    path = "/".join(_component(p, "snap") for p in repo.split("/") if p) or "snap"
    clean_tag = _BAD_TAG.sub("-", tag).lstrip(".-")[:128] or "latest"
    return f"{SNAP_PREFIX}{namespace_component(namespace)}/{path}:{clean_tag}"


def namespace_component(namespace: str) -> str:
    """The path component of ``namespace`` in snapshot tags."""
    return _component(namespace, DEFAULT_NAMESPACE)


def foreign_snapshot(image: str, namespace: str) -> bool:
    """True when ``image`` names a snapshot tag under another namespace's path."""
    if not image.startswith(SNAP_PREFIX):
        return False
    owner = image[len(SNAP_PREFIX) :].split("/", 1)[0]
    return owner != namespace_component(namespace)
