"""Schedules, pure: spec compilation and next matching times (spec, calendar) and the scheduler rules (rules).

Nothing here touches the database, the clock or Django; engine.services.schedules does the I/O.
"""
