"""The package version, in a leaf module: the CLI, the model cards and the dataset cards read it without importing the
package root (whose import registers every model class; importing it from those modules made an import cycle)."""

__version__ = "0.1.0"
