"""``python -m vflpriv``: the command line."""

from vflpriv.cli import main

if __name__ == "__main__":  # importing the module (a documentation tool's inspection) runs nothing
    main()
