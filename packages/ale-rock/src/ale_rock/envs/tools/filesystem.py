"""A simulated file system: reorganize files with tool calls; the final tree is checked."""

from __future__ import annotations

import posixpath
from typing import Any

from ale_rock.envs.tools.calls import ToolEnv, ToolFailure, tool_schema

_NAMES = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta", "zeta", "iota"]


def _norm(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ToolFailure(f"paths are absolute, got {path!r}")
    return posixpath.normpath(path)


class FileSystemEnv(ToolEnv):
    """The task: move every ``.log`` file of ``/srv/app`` into ``/archive``, delete ``/srv/app/tmp``
    (and everything under it), and write ``/archive/INDEX`` listing the moved names, sorted, one
    per line. Other files must stay untouched. Reward 1 only when the final tree is exactly right."""

    def __init__(self, max_turns: int = 30, seed: int | None = None) -> None:
        super().__init__(max_turns, seed)
        self.files: dict[str, str] = {}
        self.dirs: set[str] = set()
        self.expected: dict[str, str] = {}

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            tool_schema("list_dir", "List a directory.", {"path": "string"}),
            tool_schema("read_file", "Read a file.", {"path": "string"}),
            tool_schema("write_file", "Create or overwrite a file.", {"path": "string", "content": "string"}),
            tool_schema("move", "Move a file.", {"src": "string", "dst": "string"}),
            tool_schema("delete", "Delete a file or a directory tree.", {"path": "string"}),
            tool_schema("make_dir", "Create a directory (and its parents).", {"path": "string"}),
        ]

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.turn = 0
        names = self.rng.sample(_NAMES, 6)
        logs = sorted(f"{n}.log" for n in names[:3])
        self.dirs = {"/", "/srv", "/srv/app", "/srv/app/tmp", "/archive"}
        self.files = {f"/srv/app/{n}": f"log of {n}\n" for n in logs}
        self.files |= {f"/srv/app/{n}.py": f"print('{n}')\n" for n in names[3:5]}
        self.files[f"/srv/app/tmp/{names[5]}.cache"] = "cache\n"
        self.files["/srv/app/tmp/old.log"] = "stale\n"
        # The goal state, computed up front so the check is exact.
        self.expected = {p: c for p, c in self.files.items() if not p.startswith("/srv/app/tmp/")}
        for n in logs:
            self.expected[f"/archive/{n}"] = self.expected.pop(f"/srv/app/{n}")
        self.expected["/archive/INDEX"] = "".join(f"{n}\n" for n in logs)
        obs = (
            "Move every .log file directly inside /srv/app into /archive, delete /srv/app/tmp with "
            "everything in it, then write /archive/INDEX listing the moved file names sorted, one per "
            "line. Leave other files alone. Call submit when done."
        )
        return obs, {"tools": [t["function"]["name"] for t in self.tools]}

    def _is_dir(self, path: str) -> bool:
        return path in self.dirs

    def tool_list_dir(self, path: str) -> str:
        path = _norm(path)
        if not self._is_dir(path):
            raise ToolFailure(f"{path}: no such directory")
        subdirs = {posixpath.basename(d) + "/" for d in self.dirs if d != "/" and posixpath.dirname(d) == path}
        files = {posixpath.basename(f) for f in self.files if posixpath.dirname(f) == path}
        return "\n".join(sorted(subdirs | files)) or "(empty)"

    def tool_read_file(self, path: str) -> str:
        path = _norm(path)
        if path not in self.files:
            raise ToolFailure(f"{path}: no such file")
        return self.files[path]

    def tool_write_file(self, path: str, content: str) -> str:
        path = _norm(path)
        if not self._is_dir(posixpath.dirname(path)) or path in self.dirs:
            raise ToolFailure(f"{path}: parent directory missing or path is a directory")
        self.files[path] = str(content)
        return f"wrote {len(str(content))} bytes to {path}"

    def tool_move(self, src: str, dst: str) -> str:
        src, dst = _norm(src), _norm(dst)
        if src not in self.files:
            raise ToolFailure(f"{src}: no such file")
        if self._is_dir(dst):
            dst = posixpath.join(dst, posixpath.basename(src))
        if not self._is_dir(posixpath.dirname(dst)):
            raise ToolFailure(f"{posixpath.dirname(dst)}: no such directory")
        self.files[dst] = self.files.pop(src)
        return f"moved {src} -> {dst}"

    def tool_delete(self, path: str) -> str:
        path = _norm(path)
        if path in self.files:
            del self.files[path]
            return f"deleted {path}"
        if path in self.dirs and path != "/":
            prefix = path + "/"
            self.files = {p: c for p, c in self.files.items() if not p.startswith(prefix)}
            self.dirs = {d for d in self.dirs if d != path and not d.startswith(prefix)}
            return f"deleted directory {path}"
        raise ToolFailure(f"{path}: no such file or directory")

    def tool_make_dir(self, path: str) -> str:
        path = _norm(path)
        while path not in self.dirs:
            self.dirs.add(path)
            path = posixpath.dirname(path)
        return "ok"

    def score(self) -> tuple[float, dict[str, Any]]:
        ok = self.files == self.expected and "/srv/app/tmp" not in self.dirs
        wrong = sorted(set(self.files) ^ set(self.expected)) + sorted(
            p for p in self.expected if self.files.get(p, self.expected[p]) != self.expected[p]
        )
        return (1.0 if ok else 0.0), {"wrong_paths": wrong[:20]}
