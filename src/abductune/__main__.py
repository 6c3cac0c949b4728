"""`python -m abductune`: the same as the `abductune` console script."""
from abductune.launch import main

main()
