"""Test support that is more than a helper: servers and harnesses the tests run against."""
