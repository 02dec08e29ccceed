"""``UserInputError``: the one base class for errors a user can fix (a file, a flag, a folder, a value).

It lives in the lowest layer so every layer can raise a subclass and the CLI can turn all of them
into one line and exit code 2 without importing the layers above it.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """Bad input the user can fix; the message names the file, row, flag or value and what was expected."""
