"""`python -m service.cli`: the `kernelwatch` console script without installing it."""

from service.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
