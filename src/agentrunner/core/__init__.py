"""Plain types and rules every layer uses: ids, input rules, JSON text, log lines, paths, model
settings, what an attachment may be. No I/O.
"""
