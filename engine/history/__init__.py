"""The history state machine: pure functions from (mutable state, input, now) to events, tasks and timers.

Nothing in this package touches the database, the network, the clock or Django settings.
"""
