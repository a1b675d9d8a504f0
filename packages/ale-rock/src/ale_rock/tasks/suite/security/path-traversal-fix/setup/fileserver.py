"""A tiny static file handler."""

import os
from urllib.parse import unquote


def resolve(root, url_path):
    return os.path.join(root, unquote(url_path).lstrip("/"))


def serve(root, url_path):
    path = resolve(root, url_path)
    if os.path.isdir(path):
        path = os.path.join(path, "index.html")
    if not os.path.exists(path):
        return 404, b"not found"
    with open(path, "rb") as f:
        return 200, f.read()
