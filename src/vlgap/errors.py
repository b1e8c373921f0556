"""Exceptions that the CLI turns into a one-line message instead of a stack trace."""


class VlgapError(ValueError):
    """Bad input or an impossible request: the message names the item and what would be valid."""


class BadItemError(VlgapError):
    """One dataset item cannot be used (missing file, no frames, too few captions...)."""

    def __init__(self, item_id: str, reason: str):
        self.item_id = item_id
        self.reason = reason
        super().__init__(f"item {item_id!r}: {reason}")


def reject_renamed_keywords(where: str, kwargs: dict, renamed: dict[str, str]) -> None:
    """Raise VlgapError for keyword arguments that were renamed or moved (`renamed`: old name -> how to say
    it now), and for any other unexpected keyword; `kwargs` is the function's **kwargs."""
    for name in kwargs:
        if name in renamed:
            raise VlgapError(f"{where}: the keyword {name!r} is now {renamed[name]}")
    if kwargs:
        raise TypeError(f"{where}() got unexpected keyword arguments {sorted(kwargs)}")
