"""Egress: the worker gateway (policy, safety events) and the in-sandbox proxy."""
