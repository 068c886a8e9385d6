"""A long-lived process over one index: the HTTP API and graph explorer (app.py), the MCP server
(mcp_server.py), and the look-ups both share (browse.py)."""
