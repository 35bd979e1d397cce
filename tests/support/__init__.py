"""Test support that uses kgeval itself (multi-process scenarios, evaluated model pairs).

Kept apart from tests/helpers, which must stay independent of kgeval (it is the reference the tests trust).
"""
