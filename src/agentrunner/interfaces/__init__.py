"""The ways in: the CLI, the HTTP API and dashboard, stdio and MCP. Thin: they parse, call the
library and shape output.
"""
