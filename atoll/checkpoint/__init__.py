"""Checkpoints: settings, what a completed checkpoint records, and where checkpoints are stored.

The runtime that takes them (barriers on channels, the cut of an island, the coordinator) lives with the
islands in ``atoll._impl.islands``; this package holds what both materializers and users share.
"""
from .settings import CheckpointInfo, CheckpointSettings, RestartPolicy

__all__ = ["CheckpointSettings", "RestartPolicy", "CheckpointInfo"]
