"""What one run is made of: the application it runs in, its prompt, tools and grants, hooks,
budgets and spend, its lifecycle and rows, effects, side requests, compaction, and the runner
that sequences them.
"""
