"""`python -m abductune.cli`: the click group driven with the real command line (it still asks
a warm daemon first, see `group._Group.main`)."""
from .group import main

main()
