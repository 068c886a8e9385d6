"""Local, global and basic search over an index."""

from typing import Literal, get_args

# the search methods, as the CLI, the API, the server and experiments name them (a light module: the CLI's
# argument check imports it for every command)
SearchMethod = Literal["local", "global", "basic"]
SEARCH_METHODS: tuple[str, ...] = get_args(SearchMethod)
