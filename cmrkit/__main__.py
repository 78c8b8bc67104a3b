"""`python -m cmrkit` runs the command line."""

from cmrkit.cli import main

main()
