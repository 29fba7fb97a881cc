"""`python -m reconciler.cli …` runs the `jobtree` command line, as the console script does."""

from reconciler.cli import entry

entry()
