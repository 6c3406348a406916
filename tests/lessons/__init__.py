"""Lessons: storage and ranking, stack traces, lessons learned from work (episodes, checks), their review and trust."""
