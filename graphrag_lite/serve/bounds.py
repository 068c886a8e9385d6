"""What a request may ask of the servers, defined once for the HTTP API (app.py) and the MCP tools
(mcp_server.py): the same question, answer form, community level, hops and limits are accepted by both and
refused by both, before any work or model call. A question or answer form of a megabyte would be sent to
the model whole; a community level past any index's depth selects nothing."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from graphrag_lite.serve.browse import MAX_HOPS

MAX_QUESTION_CHARS = 4000
MAX_RESPONSE_TYPE_CHARS = 200  # "Multiple Paragraphs", "List of 3-7 Points": a description, not a prompt
MAX_COMMUNITY_LEVEL = 20  # Leiden hierarchies stop far sooner; the bound only refuses nonsense such as 10**30
MAX_MATCHES = 200  # entities listed by a name search
MAX_NEIGHBOURS = 500  # entities of a neighbourhood: beyond, most of a graph (and more than a page or a model reads)

# a question of whitespace only is refused before it costs a model call
Question = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUESTION_CHARS),
                     Field(description="the question, in natural language")]
ResponseType = Annotated[str, Field(max_length=MAX_RESPONSE_TYPE_CHARS,
                                    description="the answer's length and form, e.g. 'Multiple Paragraphs', "
                                    "'Single Sentence', 'List of 3-7 Points'")]
CommunityLevel = Annotated[int, Field(ge=0, le=MAX_COMMUNITY_LEVEL,
                                      description="community hierarchy level whose reports are used (0 = the "
                                      "broadest; deeper levels are finer-grained)")]
Hops = Annotated[int, Field(ge=1, le=MAX_HOPS, description=f"how many relationships away to go (1-{MAX_HOPS})")]
Neighbours = Annotated[int, Field(ge=1, le=MAX_NEIGHBOURS, description="most entities to list, nearest first")]
Matches = Annotated[int, Field(ge=1, le=MAX_MATCHES, description="most entities to list, best match first")]
