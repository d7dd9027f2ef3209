"""Work served over time: following runs, threads and channels; queues and workers; channels and
mailboxes; tasks; company mode; status.
"""
