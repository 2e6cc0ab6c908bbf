"""Issue 9 security regressions: a package, so its conftest does not shadow tests/conftest."""
