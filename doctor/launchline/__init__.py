"""Reading launch lines and launcher scripts as a shell would: tokenizer and quoting (`shell`), the hops of an
ssh/pct exec line (`hops`, `launchpath`), corrected lines (`launchfix`), and the command a launch runs (`commandline`)."""
