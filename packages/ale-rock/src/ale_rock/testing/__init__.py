"""Test doubles shipped with ale-rock (each declared as a fake in its docstring)."""
