"""`python -m abductune.daemon`: run the daemon in this process (`abductune daemon start`
runs this detached)."""
from abductune.daemon.server import main

main()
