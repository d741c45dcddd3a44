from dfdoctor.cli.main import entry

entry()
