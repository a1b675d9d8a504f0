"""A tiny static file handler."""

import os
from urllib.parse import unquote


def resolve(root, url_path):
    decoded = unquote(url_path)
    if "\x00" in decoded or "\\" in decoded:
        raise ValueError("forbidden character in path")
    rel = decoded.lstrip("/")
    if decoded.startswith("//") or os.path.isabs(rel):
        raise ValueError("absolute path")
    root_real = os.path.realpath(root)
    path = os.path.realpath(os.path.join(root_real, rel))
    if path != root_real and not path.startswith(root_real + os.sep):
        raise ValueError("path escapes the root")
    return path


def serve(root, url_path):
    try:
        path = resolve(root, url_path)
    except ValueError:
        return 403, b"forbidden"
    if os.path.isdir(path):
        path = os.path.join(path, "index.html")
    if not os.path.isfile(path):
        return 404, b"not found"
    with open(path, "rb") as f:
        return 200, f.read()
