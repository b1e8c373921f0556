"""`python -m vlgap ...`: the same command line as the `vlgap` script."""
from vlgap.cli import main

if __name__ == "__main__":
    main()
