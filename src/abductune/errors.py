"""The one exception type for mistakes a user can make (bad space, bad dataset, bad option)."""


class AbductuneError(ValueError):
    """Raised for errors a user can cause; the message names the thing to fix."""


class SpaceError(AbductuneError):
    """A search space is malformed: unknown name in a constraint, empty domain, bad value."""


class DatasetError(AbductuneError):
    """A recorded dataset is corrupt, truncated or inconsistent (message names file and line)."""


class StoreError(AbductuneError):
    """The measurement store is unreadable or was written by an incompatible version."""


class InvalidSeed(AbductuneError):
    """A seed config (from a heuristic or the observed database) that cannot be read against
    the space: an unknown parameter name or a value of the wrong kind."""
