"""``python -m comal`` is the ``comal`` command.

Python put the current folder first on ``sys.path``; it comes off before anything else is
imported (:mod:`comal._syspath`), so a module the model wrote into its workspace cannot stand
in for one comal imports later.
"""

from ._syspath import forget_current_folder

forget_current_folder()

from .cli import main  # noqa: E402 - after the current folder is off sys.path

main()
