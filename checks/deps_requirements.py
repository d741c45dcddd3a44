"""deps.requirements: are the required packages installed, in versions that fit, in the training interpreter?"""

from doctor import check, skip


@check("deps.requirements", title="Required packages are installed in the training interpreter", phases=("pre",), timeout=30)
def deps_requirements(ctx):
    """Placeholder while the real check is written."""
    yield skip("not implemented yet")
