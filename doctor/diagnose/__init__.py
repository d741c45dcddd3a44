"""From what a job left behind to a verdict: the rules that pick a cause id (`verdict`), reading thread stacks
(`stacks`) and recognising a compile deadlock in them (`stackclass`)."""
