"""FrozenLake: walk from S to G on a seeded grid without stepping into a hole (H)."""

from __future__ import annotations

from collections import deque
from typing import Any

from ale_rock.envs.core import Env, StepResult
from ale_rock.envs.games.parsing import last_word

MOVES = {"left": (0, -1), "right": (0, 1), "up": (-1, 0), "down": (1, 0)}
_WORDS = {w: w for w in MOVES} | {"l": "left", "r": "right", "u": "up", "d": "down"}


def grid_move(action: str) -> tuple[int, int] | None:
    """The (row, column) step of the last direction word of ``action`` (left/right/up/down or
    l/r/u/d), or None if it names none. Shared by the grid games."""
    move = last_word(action, _WORDS)
    return None if move is None else MOVES[move]


def invalid_move(board: str, truncated: bool, info: dict[str, Any]) -> StepResult:
    """A grid game's answer to an action that names no direction: no reward, the board again."""
    info["invalid_action"] = True
    return "Invalid move; answer left, right, up or down.\n" + board, 0.0, False, truncated, info


def _reachable(grid: list[list[str]], size: int) -> bool:
    seen = {(0, 0)}
    todo = deque([(0, 0)])
    while todo:
        r, c = todo.popleft()
        if grid[r][c] == "G":
            return True
        for dr, dc in MOVES.values():
            nr, nc = r + dr, c + dc
            if 0 <= nr < size and 0 <= nc < size and (nr, nc) not in seen and grid[nr][nc] != "H":
                seen.add((nr, nc))
                todo.append((nr, nc))
    return False


class FrozenLake(Env):
    """Deterministic moves (not slippery). Reaching G gives reward 1; a hole ends with 0."""

    action_description = "One move: left, right, up or down (e.g. \\boxed{down})."

    def __init__(
        self, size: int = 4, hole_prob: float = 0.2, max_turns: int = 16, seed: int | None = None
    ) -> None:
        super().__init__(seed)
        if size < 2 or not 0 <= hole_prob < 0.6:
            raise ValueError("need size >= 2 and 0 <= hole_prob < 0.6")
        self.size, self.hole_prob, self.max_turns = size, hole_prob, max_turns
        self.grid: list[list[str]] = []
        self.pos = (0, 0)
        self.turn = 0

    def _generate(self) -> list[list[str]]:
        while True:  # rejection-sample until the goal is reachable
            grid = [
                ["H" if self.rng.random() < self.hole_prob else "F" for _ in range(self.size)]
                for _ in range(self.size)
            ]
            grid[0][0], grid[-1][-1] = "S", "G"
            if _reachable(grid, self.size):
                return grid

    def render(self) -> str:
        """The grid with the player as P."""
        rows = []
        for r, row in enumerate(self.grid):
            rows.append(" ".join("P" if (r, c) == self.pos else cell for c, cell in enumerate(row)))
        return "\n".join(rows)

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.grid = self._generate()
        self.pos = (0, 0)
        self.turn = 0
        obs = (
            "You are P on a frozen lake. Reach G without stepping on a hole H (F is safe ice).\n"
            + self.render()
        )
        return obs, {"turn": 0}

    def _step(self, action: str) -> StepResult:
        self.turn += 1
        info: dict[str, Any] = {"turn": self.turn}
        truncated = self.turn >= self.max_turns
        step = grid_move(action)
        if step is None:
            return invalid_move(self.render(), truncated, info)
        dr, dc = step
        r = min(max(self.pos[0] + dr, 0), self.size - 1)
        c = min(max(self.pos[1] + dc, 0), self.size - 1)
        self.pos = (r, c)
        cell = self.grid[r][c]
        if cell == "H":
            return "You fell into a hole.\n" + self.render(), 0.0, True, False, info
        if cell == "G":
            info["success"] = True
            return "You reached the goal!\n" + self.render(), 1.0, True, False, info
        return self.render(), 0.0, False, truncated, info
