"""Exceptions that the CLI turns into a one-line message instead of a stack trace."""


class VlgapError(ValueError):
    """Bad input or an impossible request: the message names the item and what would be valid."""


class BadItemError(VlgapError):
    """One dataset item cannot be used (missing file, no frames, too few captions...)."""

    def __init__(self, item_id: str, reason: str):
        self.item_id = item_id
        self.reason = reason
        super().__init__(f"item {item_id!r}: {reason}")
