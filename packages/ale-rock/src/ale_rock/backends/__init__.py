"""Sandbox backends behind one Protocol (see base.py): local (bubblewrap) and docker."""
