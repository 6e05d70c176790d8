"""The session's one error: a problem explained to the user in one line."""


class SessionError(Exception):
    """A session problem, explained to the user in one line."""
