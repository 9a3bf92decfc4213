"""Repair, kept apart from detection and standing on it: the plan and its actions (repairs.py), what must
hold before anything is written (guards.py), and what a rebuilt index holds (rebuild.py). A check loads
none of it."""
