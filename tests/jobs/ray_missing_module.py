"""A Ray driver that imports what the cluster does not have."""
import ray  # noqa: F401
import dfdoctor_no_such_module_for_ray  # noqa: F401
