"""``python -m kansym`` runs the command-line interface."""

from kansym.cli.main import main

if __name__ == "__main__":
    main()
