"""Starting a job and watching it: the flight recorder that outlives the session (`recorder`), local and remote
starts (`local`, `remote`, `remote_run`), and the whole launch/status (`orchestrate`). The run folder's format
is `dfdoctor.run`."""
