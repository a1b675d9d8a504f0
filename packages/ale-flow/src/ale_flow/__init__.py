"""ale-flow: an open, readable agent with serious context engineering.

    from ale_flow import Agent, LocalWorkspace
    from ale_flow.models.scripted import ScriptedModel
    for event in Agent(ScriptedModel(["hello"]), LocalWorkspace("/tmp/ws")).run("say hello"):
        print(event)
"""

from ale_flow.agent import Agent
from ale_flow.events import Event, Stopped
from ale_flow.models.base import Model
from ale_flow.settings import Settings, SettingsError, load_settings
from ale_flow.tools.base import Tool, ToolRegistry
from ale_flow.types import AgentStopReason
from ale_flow.workspace import LocalWorkspace, Workspace

__version__ = "0.1.0"
__all__ = [
    "Agent",
    "Event",
    "LocalWorkspace",
    "Model",
    "Settings",
    "SettingsError",
    "AgentStopReason",
    "Stopped",
    "Tool",
    "ToolRegistry",
    "Workspace",
    "__version__",
    "load_settings",
]
