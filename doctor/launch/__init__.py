"""Starting a job and watching it: local and remote starts of the flight recorder (`local`, `remote`,
`remote_run`; the recorder itself is part of `dfdoctor.agent`), and the whole launch/status (`orchestrate`).
The run folder's format is `dfdoctor.run`."""
