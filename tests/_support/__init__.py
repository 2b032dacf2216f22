"""Helpers shared by the tests (never collected: no module here starts with ``test_``)."""
