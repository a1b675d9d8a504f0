"""Interop with the ``gem-llm`` package (imported only here, only when used).

- ``gem:<id>`` ids make a gem environment, so any gem environment runs behind our EnvService.
- :func:`register_in_gem` registers our ids in gem's registry, so ``gem.make`` / ``gem.make_vec``
  (sync and async vector wrappers) build our environments, in-process or through the service.
"""

from __future__ import annotations

from typing import Any

from ale_rock.envs.core import Env, StepResult
from ale_rock.envs.errors import EnvNotFound


def _gem() -> Any:
    try:
        import gem
    except ImportError as e:
        raise ImportError("gem: ids need the gem-llm package: pip install 'ale-rock[gem]'") from e
    return gem


class GemEnvAdapter(Env):
    """A gem environment under our episode protocol (typed errors after the episode ends)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(None)
        self.inner = inner

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.inner.reset(seed=seed)
        self._active = True
        return str(obs), dict(info or {})

    def _reset(self) -> tuple[str, dict[str, Any]]:  # pragma: no cover - reset is overridden
        raise NotImplementedError

    def _step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.inner.step(action)
        return str(obs), float(reward), bool(terminated), bool(truncated), dict(info or {})

    def close(self) -> None:
        super().close()
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


def make_gem_env(gem_id: str, **kwargs: Any) -> GemEnvAdapter:
    """Build ``gem.make(gem_id, **kwargs)`` wrapped as an :class:`Env`."""
    gem = _gem()
    from gem.envs.registration import ENV_REGISTRY

    if gem_id not in ENV_REGISTRY:
        raise EnvNotFound(f"unknown gem environment {gem_id!r}", field="env_id", env_id=f"gem:{gem_id}")
    return GemEnvAdapter(gem.make(gem_id, **kwargs))


def register_in_gem(env_ids: list[str], *, address: str | None = None, prefix: str = "ale/") -> list[str]:
    """Register our ``env_ids`` in gem's registry as ``prefix + env_id``; with ``address`` they
    run behind that EnvService, else in-process. Returns the gem ids."""
    _gem()
    from gem.envs.registration import ENV_REGISTRY, register

    out = []
    for env_id in env_ids:
        gem_id = prefix + env_id
        if gem_id not in ENV_REGISTRY:
            register(gem_id, _factory(env_id, address))
        out.append(gem_id)
    return out


def _factory(env_id: str, address: str | None) -> Any:
    def build(**kwargs: Any) -> Any:
        from ale_rock.envs import make

        return make(env_id, address=address, **kwargs)

    return build
