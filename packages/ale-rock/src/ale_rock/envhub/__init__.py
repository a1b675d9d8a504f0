"""EnvHub: a registry of environment specs (YAML files) with builds cached per spec hash."""

from ale_rock.envhub.hub import BuildEvent, EnvHub, HubError
from ale_rock.envhub.registry import BuildStatus, Registry
from ale_rock.envhub.service import EnvHubConfig, add_envhub_service, serve_envhub
from ale_rock.envhub.spec import EnvSpecError, EnvSpecModel, load_spec, parse_spec

__all__ = [
    "BuildEvent",
    "BuildStatus",
    "EnvHub",
    "EnvHubConfig",
    "EnvSpecError",
    "EnvSpecModel",
    "HubError",
    "Registry",
    "add_envhub_service",
    "load_spec",
    "parse_spec",
    "serve_envhub",
]
