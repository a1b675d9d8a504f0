"""The agent episode: one implementation for evaluation (``ale eval``) and training (ale-roll's
agent-native rollout). See :mod:`ale_rock.episode.run` for the phases and
:mod:`ale_rock.episode.outcome` for what an episode ends as (a score, or an error and its kind)."""

from ale_rock.episode.agents import Agent, AgentContext, CommandAgent
from ale_rock.episode.classify import classify_call, classify_exception
from ale_rock.episode.config import EpisodeTimeouts
from ale_rock.episode.outcome import AgentRun, EpisodeError, EpisodeOutcome, ErrorKind, Status
from ale_rock.episode.run import arun_episode, run_episode

__all__ = [
    "Agent", "AgentContext", "AgentRun", "CommandAgent", "EpisodeError", "EpisodeOutcome", "EpisodeTimeouts",
    "ErrorKind", "Status", "arun_episode", "classify_call", "classify_exception", "run_episode",
]
