"""A small shared testing package: what tests/, bench/ and loadtest/ all need to run the app (testkit/harness.py)."""
