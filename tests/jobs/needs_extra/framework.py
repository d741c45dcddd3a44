"""A framework's CLI that needs an optional extra, and says so as Lightning's LightningCLI does when
jsonargparse[signatures] is missing (its message names the install line)."""


class CLI:
    def __init__(self, model):
        try:
            import jsonargparse_signatures_for_dfdoctor_tests  # noqa: F401 (an extra that is never installed)
        except ImportError:
            raise ModuleNotFoundError("Requirement 'jsonargparse[signatures]>=4.27.7' not met. HINT: Try running "
                                      "`pip install -U 'jsonargparse[signatures]>=4.27.7'`") from None
        self.model = model
