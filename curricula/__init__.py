"""Curriculum datasets (SingleLine, Tutorial, CodeNetMut) and the stage schedule (SPEC §5)."""
