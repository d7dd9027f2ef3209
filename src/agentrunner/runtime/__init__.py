"""The composition root: a project's files made into a running runtime (open_runner,
open_workspace, execute), and new projects scaffolded.
"""
