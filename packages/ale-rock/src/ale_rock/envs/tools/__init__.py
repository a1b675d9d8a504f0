"""Stateful tool-use environments: actions are JSON tool calls, the reward checks the final state."""
