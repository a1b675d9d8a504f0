"""Sokoban: push every box ($) onto a target (.) in a small room generated from the seed.

Levels are generated backwards: boxes start on their targets and the player *pulls* them
around at random; every pull is the reverse of a legal push, so every level is solvable.
"""

from __future__ import annotations

from typing import Any

from ale_rock.envs.core import Env, StepResult
from ale_rock.envs.games.frozen_lake import MOVES, grid_move, invalid_move

Pos = tuple[int, int]


class Sokoban(Env):
    """Reward 1 when all boxes are on targets (terminated); the turn limit truncates."""

    action_description = "One move: left, right, up or down (e.g. \\boxed{up}). Walking into a box pushes it."

    def __init__(
        self,
        width: int = 6,
        height: int = 6,
        num_boxes: int = 1,
        pulls: int = 12,
        max_turns: int = 30,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed)
        if width < 4 or height < 4 or num_boxes < 1 or num_boxes > (width - 2) * (height - 2) // 4:
            raise ValueError("room too small for that many boxes")
        self.width, self.height, self.num_boxes = width, height, num_boxes
        self.pulls, self.max_turns = pulls, max_turns
        self.targets: set[Pos] = set()
        self.boxes: set[Pos] = set()
        self.player: Pos = (1, 1)
        self.turn = 0

    def _floor(self, p: Pos) -> bool:
        return 0 < p[0] < self.height - 1 and 0 < p[1] < self.width - 1

    def _generate(self) -> None:
        # Targets away from the walls: a box pushed against a wall far from any target is stuck,
        # and pulling cannot bring a box off a wall-adjacent cell in every direction.
        cells = [(r, c) for r in range(1, self.height - 1) for c in range(1, self.width - 1)]
        inner = [p for p in cells if 1 < p[0] < self.height - 2 and 1 < p[1] < self.width - 2] or cells
        while True:
            self.targets = set(self.rng.sample(inner, self.num_boxes))
            boxes = set(self.targets)
            player = self.rng.choice([p for p in cells if p not in boxes])
            for _ in range(self.pulls * 4):
                dr, dc = self.rng.choice(list(MOVES.values()))
                nxt = (player[0] + dr, player[1] + dc)
                if not self._floor(nxt) or nxt in boxes:
                    continue
                behind = (player[0] - dr, player[1] - dc)
                if behind in boxes and self.rng.random() < 0.7:
                    boxes.remove(behind)
                    boxes.add(player)
                player = nxt
            if boxes != self.targets:
                self.boxes, self.player = boxes, player
                return

    def render(self) -> str:
        """The room: # wall, @ player, $ box, . target, * box on target, + player on target."""
        rows = []
        for r in range(self.height):
            row = []
            for c in range(self.width):
                p = (r, c)
                if not self._floor(p):
                    row.append("#")
                elif p == self.player:
                    row.append("+" if p in self.targets else "@")
                elif p in self.boxes:
                    row.append("*" if p in self.targets else "$")
                else:
                    row.append("." if p in self.targets else " ")
            rows.append("".join(row))
        return "\n".join(rows)

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self._generate()
        self.turn = 0
        obs = "Push every box $ onto a target . (# wall, @ you, * box on target).\n" + self.render()
        return obs, {"turn": 0, "boxes_on_target": len(self.boxes & self.targets)}

    def _step(self, action: str) -> StepResult:
        self.turn += 1
        truncated = self.turn >= self.max_turns
        info: dict[str, Any] = {"turn": self.turn}
        step = grid_move(action)
        if step is None:
            return invalid_move(self.render(), truncated, info)
        dr, dc = step
        nxt = (self.player[0] + dr, self.player[1] + dc)
        if self._floor(nxt):
            if nxt in self.boxes:
                beyond = (nxt[0] + dr, nxt[1] + dc)
                if self._floor(beyond) and beyond not in self.boxes:
                    self.boxes.remove(nxt)
                    self.boxes.add(beyond)
                    self.player = nxt
            else:
                self.player = nxt
        info["boxes_on_target"] = len(self.boxes & self.targets)
        if self.boxes == self.targets:
            info["success"] = True
            return "Solved!\n" + self.render(), 1.0, True, False, info
        return self.render(), 0.0, False, truncated, info
