"""The neural debugger: a program walked with pdb's actions, each answered by the model from
the real run's state (session.py), and the events and actions it walks by (events.py)."""

from codeexecutor.debugger.session import Session

__all__ = ["Session"]
