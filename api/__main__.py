"""``python -m api``: the ``frontier`` command."""

from api.cli import main

if __name__ == "__main__":
    main()
