"""Curriculum datasets (SingleLine, Tutorial, CodeNetMut) and the stage schedule (docs/curriculum.md)."""
