"""``python -m comal`` is the ``comal`` command."""

from .cli import main

main()
