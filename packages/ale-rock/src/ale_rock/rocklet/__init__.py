"""The Rocklet: the door of each sandbox (exec, sessions, files, egress proxy)."""
