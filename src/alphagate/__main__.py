"""`python -m alphagate` runs the command-line interface."""

from alphagate.cli import main

main()
