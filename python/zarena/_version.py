# The package version; tests/python checks that it equals project(zarena VERSION ...).
__version__ = "1.1.0"
