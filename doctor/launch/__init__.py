"""Starting a job and watching it: the flight recorder that outlives the session (`recorder`), local and remote
starts (`local`, `remote`, `remote_run`), the run folder (`rundir`), and the whole launch/status (`orchestrate`)."""
