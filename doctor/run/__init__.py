"""The run folder's format, as the host reads and writes it: which files a run folder holds (`names`, shared with
the recorder that writes them), the marker that makes a folder a run's (`marker`), the user's index of runs
(`index`), the recorder's record as read back (`record.RunRecord`), what a watch saw of a live job
(`live.LiveFacts`), the launch's secrets kept as fingerprints (`masks`), dfdoctor's own event log (`events`), and
the folder itself (`folder.RunFolder`: found, made, pruned, and written through one masker).

`diagnose/` reads runs through this package only and never imports `launch/`.
"""
