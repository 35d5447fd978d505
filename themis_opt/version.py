"""The package's version, read by the package, the command line and the build."""

__version__ = "0.2.0"
